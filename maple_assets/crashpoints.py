"""Crash points for the crash tests (``MAPLE_CRASH_AT``); see ``resources.crashpoints``."""

from resources.crashpoints import POINTS, CrashPointReached, crash_point

__all__ = ["POINTS", "CrashPointReached", "crash_point"]
