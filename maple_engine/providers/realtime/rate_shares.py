"""One provider account's rate limit shared by every process sending to the same model.

A real-time pacer learns its account's RPM/TPM from response headers, but the limit belongs to
the account and model, not to the process: N runs sending at once (CLI drivers, Dagster run
workers on other machines) would each pace to the whole limit and send N times it. Each sender
therefore keeps a heartbeat object under the storage root every run shares::

    _ratelimits/<provider>/<account>/<model>/<sender>.json

and paces to 1/N of the limit, N being the senders whose heartbeat was written less than
``TTL_S`` ago. That age is read on the storage's own clock (S3's ``Last-Modified`` against its
``Date``; a local file's mtime), so a host whose clock is off neither lingers in the count nor
drops out of it. ``account`` is a digest of the base URL and API key (never the key), so two
accounts never share. A sender that dies stops renewing and drops out after ``TTL_S``; one that
finishes removes itself, so the others speed up at their next beat.
"""

import hashlib
import os
import re
import socket
import time
import uuid

from maple_engine.storage.layout import join, rate_share_folder
from maple_engine.storage.storage import Storage

BEAT_S = 2.0  # how often a sender renews its heartbeat and counts the others
TTL_S = 10.0  # a heartbeat not renewed for this long no longer counts
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def account_digest(base_url: str, api_key: str) -> str:
    return hashlib.sha256(f"{base_url}\x00{api_key}".encode()).hexdigest()[:16]


class RateShare:
    """This process's share of ``provider``/``model``'s limit on one account."""

    def __init__(self, storage: Storage, provider: str, account: str, model: str) -> None:
        self.storage = storage
        self.folder = rate_share_folder(
            _SAFE.sub("_", provider), account, _SAFE.sub("_", model) or "_"
        )
        self.sender = f"{_SAFE.sub('_', socket.gethostname())}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.senders = 1
        self._key: str | None = None
        self._beat_at = 0.0

    def beat(self, now: float | None = None) -> int:
        """Renew this sender's heartbeat (at most every ``BEAT_S``); the live senders, >= 1."""
        now = time.monotonic() if now is None else now
        if self._key is not None and now - self._beat_at < BEAT_S:
            return self.senders
        self._key, self._beat_at = join(self.folder, f"{self.sender}.json"), now
        self.storage.write_bytes(self._key, b"{}")
        live: set[str] = set()
        for found, age in self.storage.ages(self.folder).items():
            if not found.endswith(".json"):  # a write in progress
                continue
            sender = found.rsplit("/", 1)[-1].removesuffix(".json").partition("~")[0]
            if age < TTL_S:
                live.add(sender)
            elif age > 6 * TTL_S:  # long dead: tidy it away
                self.storage.delete(found)
        self.senders = max(1, len(live | {self.sender}))
        return self.senders

    def leave(self) -> None:
        if self._key is not None:
            self.storage.delete(self._key)
            self._key = None
