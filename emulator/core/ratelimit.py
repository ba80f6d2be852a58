"""Real-time rate limiting, as providers enforce per-minute limits: over fixed windows, or with
a continuous token bucket.

``window`` (the default): a limit of N per minute is enforced over windows of ``burst_seconds``
S holding N x S / 60 requests, as OpenAI enforces 60,000 RPM as about 1,000 requests in any
given second. The default S = 1 is that per-second enforcement; S = 60 is a full-minute bucket.
When a window would hold less than one request it grows so that it holds one (30 RPM at S = 1:
one request per two seconds).

``bucket``: a token bucket of N x S / 60 (at least one request) refilled continuously at N per
minute, full at the start. Providers' limiters behave this way: Anthropic's rate-limit guide
(https://docs.anthropic.com/en/api/rate-limits) says its limits use the token bucket algorithm,
capacity replenished continuously up to the maximum rather than reset at fixed intervals, and
OpenAI's (https://platform.openai.com/docs/guides/rate-limits, "rate limits in headers")
reports ``x-ratelimit-reset-*`` as the time until the limit is back at its initial state, a
few milliseconds after one request at a high limit: a continuous replenishment, not a window
edge. Its headers read as the window's do: the remaining count is the bucket's level per minute
(a full bucket reads N), the reset is the time until the bucket is full again.
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

    def take(self, amount: float) -> None:
        self.used += amount

    def reset_in(self, now: float) -> float:
        return max(0.0, self.start + self.length - now)

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits again: the next window."""
        return self.reset_in(now)

    def remaining(self) -> int:
        left = max(0.0, self.capacity - self.used)
        return int(left * 60 / self.length) if self.enforced else self.per_minute


@dataclass
class _Bucket:
    """A token bucket of ``per_minute`` x ``burst_seconds`` / 60 (at least 1), refilled
    continuously at ``per_minute`` a minute; full at the start."""

    per_minute: int
    enforced: bool
    burst_seconds: float = 1.0
    capacity: float = 0.0
    level: float = 0.0
    at: float | None = None  # when ``level`` was last brought up to date

    def __post_init__(self) -> None:
        self.capacity = max(1.0, self.per_minute * self.burst_seconds / 60)
        self.level = self.capacity

    @property
    def rate(self) -> float:
        return self.per_minute / 60

    def roll(self, now: float) -> None:
        if self.at is not None:
            self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = now

    def fits(self, amount: float) -> bool:
        return not self.enforced or amount <= self.level + 1e-9

    def take(self, amount: float) -> None:
        if self.enforced:
            self.level -= amount

    def reset_in(self, now: float) -> float:
        """Until the bucket is full again."""
        return max(0.0, self.capacity - self.level) / self.rate

    def wait_for(self, amount: float, now: float) -> float:
        return max(0.0, amount - self.level) / self.rate

    def remaining(self) -> int:
        if not self.enforced:
            return self.per_minute
        return int(max(0.0, self.level) * 60 / (self.capacity / self.rate))


@dataclass
class Decision:
    """Whether a request may run, and the values for the rate-limit headers."""

    allowed: bool
    kind: str
    retry_after: float
    too_large: bool
    requests: tuple[int, int, float]
    tokens: tuple[int, int, float]


#: ``--limiter`` values: fixed windows, or a continuous token bucket
LIMITERS = ("window", "bucket")


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits, over fixed windows (``window``) or as
    continuous token buckets (``bucket``)."""

    def __init__(
        self, rpm: int | None, tpm: int | None, burst_seconds: float = 1.0, kind: str = "window"
    ) -> None:
        if not 0 < burst_seconds <= 60:
            raise ValueError(f"burst_seconds must be in (0, 60], got {burst_seconds}")
        if kind not in LIMITERS:
            raise ValueError(f"limiter must be one of {', '.join(LIMITERS)}, got {kind}")
        self._lock = threading.Lock()
        shape = _Bucket if kind == "bucket" else _Window
        self._requests: _Window | _Bucket = shape(
            rpm or NOMINAL_RPM, rpm is not None, burst_seconds
        )
        self._tokens: _Window | _Bucket = shape(tpm or NOMINAL_TPM, tpm is not None, burst_seconds)

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
                req.take(1)
                tok.take(tokens)
            retry = req.wait_for(1, now) if kind == "requests" else tok.wait_for(tokens, now)
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
