"""Shared machinery of the emulator: state, faults, rate limits, tokens, replies, HTTP helpers."""
