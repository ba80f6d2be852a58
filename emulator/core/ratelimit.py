"""Real-time rate limiting over fixed windows, as providers enforce per-minute limits.

A limit of N per minute is enforced over windows of ``burst_seconds`` S holding N x S / 60
requests, as OpenAI enforces 60,000 RPM as about 1,000 requests in any given second. The
default S = 1 is that per-second enforcement; S = 60 is a full-minute bucket. When a window
would hold less than one request it grows so that it holds one (30 RPM at S = 1: one request
per two seconds).
"""

import math
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

NOMINAL_RPM = 10_000
NOMINAL_TPM = 10_000_000


@dataclass
class _Window:
    per_minute: int
    enforced: bool
    burst_seconds: float = 1.0
    capacity: float = 0.0
    length: float = 1.0
    start: float = 0.0
    used: float = 0.0

    def __post_init__(self) -> None:
        per_window = self.per_minute * self.burst_seconds / 60
        if per_window >= 1:
            self.capacity, self.length = per_window, self.burst_seconds
        else:
            self.capacity, self.length = 1.0, 60 / self.per_minute

    def roll(self, now: float) -> None:
        start = math.floor(now / self.length) * self.length
        if start != self.start:
            self.start, self.used = start, 0.0

    def fits(self, amount: float) -> bool:
        return not self.enforced or self.used + amount <= self.capacity

    def reset_in(self, now: float) -> float:
        return max(0.0, self.start + self.length - now)

    def remaining(self) -> int:
        left = max(0.0, self.capacity - self.used)
        return int(left * 60 / self.length) if self.enforced else self.per_minute


@dataclass
class Decision:
    """Whether a request may run, and the values for the rate-limit headers."""

    allowed: bool
    kind: str
    retry_after: float
    too_large: bool
    requests: tuple[int, int, float]
    tokens: tuple[int, int, float]


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits over fixed windows."""

    def __init__(self, rpm: int | None, tpm: int | None, burst_seconds: float = 1.0) -> None:
        if not 0 < burst_seconds <= 60:
            raise ValueError(f"burst_seconds must be in (0, 60], got {burst_seconds}")
        self._lock = threading.Lock()
        self._requests = _Window(rpm or NOMINAL_RPM, rpm is not None, burst_seconds)
        self._tokens = _Window(tpm or NOMINAL_TPM, tpm is not None, burst_seconds)

    def check(self, tokens: int, now: float | None = None) -> Decision:
        """Admit (and count) a request of ``tokens`` tokens, or refuse it with a retry delay."""
        now = time.time() if now is None else now
        with self._lock:
            req, tok = self._requests, self._tokens
            req.roll(now)
            tok.roll(now)
            too_large = tok.enforced and tokens > tok.capacity
            allowed = not too_large and req.fits(1) and tok.fits(tokens)
            kind = "requests" if not req.fits(1) else "tokens"
            if allowed:
                req.used += 1
                tok.used += tokens
            retry = req.reset_in(now) if kind == "requests" else tok.reset_in(now)
            return Decision(
                allowed,
                kind,
                max(retry, 0.001),
                too_large,
                (req.per_minute, req.remaining(), req.reset_in(now)),
                (tok.per_minute, tok.remaining(), tok.reset_in(now)),
            )


def go_duration(seconds: float) -> str:
    """A Go-style duration as OpenAI's reset headers use: ``120ms``, ``1s``, ``1m2s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def openai_headers(decision: Decision) -> dict[str, str]:
    """OpenAI's ``x-ratelimit-*`` headers."""
    (r_limit, r_left, r_reset), (t_limit, t_left, t_reset) = decision.requests, decision.tokens
    return {
        "x-ratelimit-limit-requests": str(r_limit),
        "x-ratelimit-remaining-requests": str(r_left),
        "x-ratelimit-reset-requests": go_duration(r_reset),
        "x-ratelimit-limit-tokens": str(t_limit),
        "x-ratelimit-remaining-tokens": str(t_left),
        "x-ratelimit-reset-tokens": go_duration(t_reset),
    }


def rfc3339(epoch: float) -> str:
    """``2025-08-21T12:40:59.123456Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def anthropic_headers(decision: Decision, now: float | None = None) -> dict[str, str]:
    """Anthropic's ``anthropic-ratelimit-*`` headers (resets as RFC 3339 timestamps)."""
    now = time.time() if now is None else now
    (r_limit, r_left, r_reset), (t_limit, t_left, t_reset) = decision.requests, decision.tokens
    headers = {
        "anthropic-ratelimit-requests-limit": str(r_limit),
        "anthropic-ratelimit-requests-remaining": str(r_left),
        "anthropic-ratelimit-requests-reset": rfc3339(now + r_reset),
    }
    for family in ("tokens", "input-tokens", "output-tokens"):
        headers[f"anthropic-ratelimit-{family}-limit"] = str(t_limit)
        headers[f"anthropic-ratelimit-{family}-remaining"] = str(t_left)
        headers[f"anthropic-ratelimit-{family}-reset"] = rfc3339(now + t_reset)
    return headers


def retry_headers(decision: Decision) -> dict[str, str]:
    """``retry-after`` (whole seconds, rounded up) and ``retry-after-ms`` for a refused request."""
    if decision.too_large:
        return {"x-should-retry": "false"}
    return {
        "retry-after": str(max(1, math.ceil(decision.retry_after))),
        "retry-after-ms": str(max(1, round(decision.retry_after * 1000))),
    }
