"""Mistral batch jobs, served by the OpenAI batch engine."""
