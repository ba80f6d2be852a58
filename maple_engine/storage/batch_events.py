"""Batch events a provider pushed (webhooks), kept under the storage root for the drivers.

`maple webhooks` verifies each delivery and records it here; the enrichment sensor and the
command line's driver read the events of the batches they wait for, poll those at once, and
consume them. Layout, per provider that pushes (its capabilities' ``webhooks``)::

    _webhooks/<provider>/events/<batch id>.json   the last event of a batch not yet consumed:
                                                  type, webhook id, when it was received
    _webhooks/<provider>/ids/<sha256 of id>       a webhook id already recorded (a replay of
                                                  it changes nothing)

An event is a hint, never a result: the batch is still polled before it is collected, so an
event that arrives early, late or for another job's batch costs at most one poll. Events and ids
older than ``KEEP_S`` (a provider's retries end within 72 h) are pruned by the recorder.
"""

import hashlib
import time
from collections.abc import Collection

from maple_engine.storage.layout import join, last_part
from maple_engine.storage.storage import Storage

FOLDER = "_webhooks"
KEEP_S = 3 * 24 * 3600
_SUFFIX = ".json"


class BatchEvents:
    """The pushed events of one provider's batches under a storage root."""

    def __init__(self, storage: Storage, provider: str) -> None:
        self.storage = storage
        self.events = join(FOLDER, provider, "events")
        self.ids = join(FOLDER, provider, "ids")

    def record(self, webhook_id: str, batch_id: str, kind: str) -> bool:
        """Keep the event of ``batch_id``; False (nothing kept) if ``webhook_id`` was
        recorded before: a replay, or the provider's retry of a delivery already taken."""
        marker = join(self.ids, hashlib.sha256(webhook_id.encode()).hexdigest())
        if not self.storage.create_exclusive(marker, b""):
            return False
        event = {"type": kind, "webhook_id": webhook_id, "received_at": time.time()}
        self.storage.write_json(join(self.events, batch_id + _SUFFIX), event)
        return True

    def waiting(self) -> set[str]:
        """The batch ids with an event not yet consumed (one listing)."""
        names = (last_part(k) for k in self.storage.list_keys(self.events))
        return {n.removesuffix(_SUFFIX) for n in names if n.endswith(_SUFFIX)}

    def among(self, batch_ids: Collection[str]) -> set[str]:
        """Of ``batch_ids``, those with an event not yet consumed."""
        if not batch_ids:
            return set()
        return self.waiting() & set(batch_ids)

    def consume(self, batch_ids: Collection[str]) -> None:
        """Forget the events of ``batch_ids``: they were polled since."""
        for batch_id in batch_ids:
            self.storage.delete(join(self.events, batch_id + _SUFFIX))

    def prune(self, keep_s: float = KEEP_S) -> int:
        """Delete events and ids older than ``keep_s``; how many."""
        old = [
            key
            for folder in (self.events, self.ids)
            for key, age in self.storage.ages(folder).items()
            if age > keep_s
        ]
        for key in old:
            self.storage.delete(key)
        return len(old)
