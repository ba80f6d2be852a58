"""Durations as people and servers write them, read in one place.

- A job's own durations (``--deadline 6h``, ``1h30m``, ``90s``, ``2d``): `parse_duration`, strict,
  a `ConfigError` naming the option and the fix for anything else.
- A server's waits and resets: Go-style durations (OpenAI's ``x-ratelimit-reset-*``: ``120ms``,
  ``1s``, ``6m0s``), Google's ``retryDelay`` (``"13s"``), plain seconds, or an RFC 3339 moment
  (Anthropic's resets): `duration_seconds` and `seconds_until`, None for what they cannot read.
"""

import functools
import re
from datetime import datetime

from maple_engine.errors import ConfigError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_JOB_UNITS = ("s", "m", "h", "d")


def _parts(text: str) -> list[tuple[str, str]] | None:
    """The (number, unit) parts of ``text`` if they spell all of it, else None."""
    parts: list[tuple[str, str]] = _PART.findall(text)
    return parts if parts and "".join(n + u for n, u in parts) == text else None


def parse_duration(text: str, what: str = "--deadline") -> float:
    """``90s``, ``30m``, ``6h``, ``1h30m``, ``2d`` -> seconds; anything else a ConfigError."""
    clean = text.strip().lower().replace(" ", "")
    parts = _parts(clean)
    if parts is None or any(unit not in _JOB_UNITS for _, unit in parts):
        raise ConfigError(
            f"{what} {text!r} is not a duration: write a number with a unit, s/m/h/d, e.g. 90s, "
            "30m, 6h or 1h30m."
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError(f"{what} {text!r} must be longer than zero.")
    return seconds


@functools.lru_cache(maxsize=4096)  # every real-time answer has two; few distinct ones
def duration_seconds(text: str) -> float | None:
    """Seconds in a server's duration (``1m2.5s``, ``17ms``, ``13s``) or plain number of
    seconds; None when it is neither."""
    clean = text.strip()
    parts = _parts(clean)
    if parts is not None:
        return sum(float(n) * _UNITS[u] for n, u in parts)
    try:
        return float(clean)
    except ValueError:
        return None


def seconds_until(text: str | None, now_epoch: float) -> float | None:
    """Seconds until a reset given as a duration or as an RFC 3339 timestamp."""
    if not text:
        return None
    if "T" in text:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
        return max(0.0, moment - now_epoch)
    return duration_seconds(text)
