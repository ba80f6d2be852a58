"""Deterministic fault draws: the same seed, body and attempt always give the same outcome.

A transient fault (everything but ``refused``) is drawn from ``(seed, class, body, attempt)``,
where ``attempt`` counts how many times this emulator already processed the same body, so a
re-sent body gets a fresh draw. ``refused`` is drawn from ``(seed, body)`` only: a refused body
stays refused, as with a real provider.
"""

import threading
import zlib
from collections.abc import Mapping

import orjson

#: Order in which drawn faults take precedence when several hit the same request.
_PRECEDENCE = (
    "rate_limited",
    "insufficient_quota",
    "server_error",
    "invalid_request",
    "invalid_image",
    "refused",
    "invalid_output",
)
_MASK = (1 << 64) - 1


def canonical(body: object) -> bytes:
    """A body serialised with sorted keys: equal bodies give equal bytes."""
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def bytes_key(data: bytes) -> int:
    """A stable 64-bit key of raw bytes (the same in every process and run)."""
    return (zlib.crc32(data) << 32) | zlib.adler32(data)


def body_key(body: object) -> int:
    """A stable 64-bit key of a request body, independent of key order."""
    return bytes_key(canonical(body))


def _mix(value: int) -> int:
    """splitmix64's finaliser: spreads any 64-bit input uniformly."""
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB & _MASK
    return value ^ (value >> 31)


class FaultDrawer:
    """Draws fault classes for request bodies at configured rates, counting attempts per body."""

    def __init__(self, seed: int, rates: Mapping[str, float]) -> None:
        self._seed = _mix(seed & _MASK)
        self.rates = {name: rate for name, rate in rates.items() if rate > 0}
        self._order = [name for name in _PRECEDENCE if name in self.rates]
        self._attempts: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether any per-request fault class has a non-zero rate."""
        return bool(self._order)

    def next_attempt(self, key: int) -> int:
        """How many times ``key`` was processed before; counts this processing."""
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        return attempt

    def uniform(self, name: str, key: int, attempt: int | None) -> float:
        """A number in [0, 1) fixed by the seed, the class, the key and the attempt."""
        salt = zlib.crc32(name.encode())
        value = _mix(self._seed ^ _mix(key ^ (salt << 16)))
        if attempt is not None:
            value = _mix(value ^ (attempt + 1))
        return value / float(1 << 64)

    def hit(self, name: str, key: int, attempt: int | None) -> bool:
        """Whether fault ``name`` strikes this key and attempt."""
        rate = self.rates.get(name, 0.0)
        return rate > 0 and (rate >= 1.0 or self.uniform(name, key, attempt) < rate)

    def draw(self, key: int, *, image: bool, schema: bool) -> str | None:
        """The fault class for one processing of a body, or None; counts the attempt."""
        if not self.active:
            return None
        attempt = self.next_attempt(key)
        for name in self._order:
            if (name == "invalid_image" and not image) or (name == "invalid_output" and not schema):
                continue
            if self.hit(name, key, None if name == "refused" else attempt):
                return name
        return None


def billing_key(provider: str, custom_id: str, canonical_body: bytes) -> int:
    """The paid-twice key of a batch request: provider, custom_id and canonical body."""
    return hash((provider, custom_id, canonical_body))
