"""Deterministic fault draws: the same seed, body and attempt always give the same outcome.

A transient fault (everything but ``refused``) is drawn from ``(seed, class, body, attempt)``,
where ``attempt`` counts how many times this emulator already processed the same body, so a
re-sent body gets a fresh draw. ``refused`` is drawn from ``(seed, body)`` only: a refused body
stays refused, as with a real provider.
"""

import hashlib
import threading
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
_SCALE = float(1 << 32)


def body_key(body: object) -> bytes:
    """A 16-byte digest of a request body, independent of key order."""
    return hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def bytes_key(data: bytes) -> bytes:
    """A 16-byte digest of raw bytes."""
    return hashlib.blake2b(data, digest_size=16).digest()


class FaultDrawer:
    """Draws fault classes for request bodies at configured rates, counting attempts per body."""

    def __init__(self, seed: int, rates: Mapping[str, float]) -> None:
        self._seed = seed.to_bytes(8, "little", signed=True)
        self.rates = {name: rate for name, rate in rates.items() if rate > 0}
        self._order = [name for name in _PRECEDENCE if name in self.rates]
        self._attempts: dict[bytes, int] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether any per-request fault class has a non-zero rate."""
        return bool(self._order)

    def next_attempt(self, key: bytes) -> int:
        """How many times ``key`` was processed before; counts this processing."""
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        return attempt

    def uniform(self, name: str, key: bytes, attempt: int | None) -> float:
        """A number in [0, 1) fixed by the seed, the class, the key and the attempt."""
        tail = b"" if attempt is None else attempt.to_bytes(4, "little")
        digest = hashlib.blake2b(self._seed + name.encode() + key + tail, digest_size=4).digest()
        return int.from_bytes(digest, "little") / _SCALE

    def hit(self, name: str, key: bytes, attempt: int | None) -> bool:
        """Whether fault ``name`` strikes this key and attempt."""
        rate = self.rates.get(name, 0.0)
        return rate > 0 and (rate >= 1.0 or self.uniform(name, key, attempt) < rate)

    def draw(self, key: bytes, *, image: bool, schema: bool) -> str | None:
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
