"""Create intents: how a batch API whose batches carry no metadata (Anthropic's Message Batches,
OpenRouter's inline batches) finds a batch again after a crash or a create whose answer is lost.

The provider keeps a durable *intent* per create call, under the storage root at
``<job>/state/<folder>/<shard>-<attempt>.json``:

1. before the create: ``{shard, attempt, hash, count, at}``;
2. right after the create answers: the same record plus ``batch_id``.

A crash after step 2 (before the submission is recorded) is recovered exactly: the intent names
the batch. A crash between the create and step 2 leaves an intent without a batch id; it is
matched to the newest-first batch list by request count and creation time within [intent time -
``clock_skew_s``, + ``window_s``], skipping batches other intents already claim. Only a unique
match is adopted. A create whose answer is lost (a 5xx, a timeout) is looked up the same way
before it is sent again, so shards of one size created one after another are told apart by the
batch ids their intents recorded.
Residual risk: in that window another client of the same account creates a batch with exactly
the same number of requests, and this one never reached the provider; then the other batch would
be adopted (its results would not carry our custom ids, so every row comes back "not run" and is
resubmitted - nothing is lost, and nothing is paid twice by us). If several candidates match,
none is adopted and the shard is submitted again (the risk is then paying twice for that one
shard). Listing stops at the first batch older than the oldest unmatched intent, so the common
case (no crash) costs no list call at all.
"""

import dataclasses
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pydantic import Field

from maple_engine.model import Submission
from maple_engine.providers.base import ProviderModel, ShardPayload
from maple_engine.settings import DEFAULT_STORAGE
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

#: A listed batch's request count (None: not counted yet, any count matches) and creation time
#: (epoch seconds).
Count = Callable[[dict[str, Any]], int | None]
Created = Callable[[dict[str, Any]], float]


@dataclasses.dataclass(frozen=True)
class CreateIntents:
    """The intents of one provider's creates under ``root`` (the job's storage root), in
    ``folder`` of each job's state; a listed batch's request count is ``count(batch)`` and its
    creation time ``created(batch)``."""

    root: str
    folder: str
    count: Count
    created: Created
    clock_skew_s: float = 60.0
    window_s: float = 900.0

    def _key(self, job: str, shard: str, attempt: int) -> str:
        return JobLayout(job).provider_state(self.folder, f"{shard}-{attempt}.json")

    def opened(self, payload: ShardPayload, digest: str) -> dict[str, Any]:
        """The intent of ``payload``'s create, written before it is sent."""
        intent = {
            "shard": payload.shard,
            "attempt": payload.attempt,
            "hash": digest,
            "count": payload.requests.height,
            "at": time.time(),
        }
        self.write(payload, intent)
        return intent

    def write(self, payload: ShardPayload, record: dict[str, Any]) -> None:
        key = self._key(payload.job, payload.shard, payload.attempt)
        Storage(self.root).write_json(key, record)

    def read(self, job: str) -> list[dict[str, Any]]:
        storage = Storage(self.root)
        keys = storage.list_keys(JobLayout(job).provider_state(self.folder))
        return [dict(storage.read_json(k)) for k in keys if k.endswith(".json")]

    def claimed(self, job: str) -> set[str]:
        """The batch ids the job's intents name."""
        return {str(i["batch_id"]) for i in self.read(job) if i.get("batch_id")}

    def match(
        self,
        listing: Iterable[dict[str, Any]],
        open_intents: list[dict[str, Any]],
        claimed: set[str],
    ) -> dict[str, dict[str, Any]]:
        """Batches of ``listing`` (newest first) that match each intent uniquely, keyed by
        ``shard-attempt``."""
        oldest = min(float(i["at"]) for i in open_intents) - self.clock_skew_s
        candidates: dict[str, list[dict[str, Any]]] = {intent_key(i): [] for i in open_intents}
        for batch in listing:
            created = self.created(batch)
            if created < oldest:
                break
            if batch["id"] in claimed:
                continue
            total = self.count(batch)
            for intent in open_intents:
                start = float(intent["at"]) - self.clock_skew_s
                counted = total is None or total == intent["count"]
                if counted and start <= created <= start + self.window_s:
                    candidates[intent_key(intent)].append(batch)
        return {key: found[0] for key, found in candidates.items() if len(found) == 1}

    def lookup(
        self, listing: Iterable[dict[str, Any]], intent: dict[str, Any], job: str
    ) -> dict[str, Any] | None:
        """The batch ``intent``'s create made, among those no other intent of ``job`` names."""
        return self.match(listing, [intent], self.claimed(job)).get(intent_key(intent))

    def orphans(
        self, job: str, provider: str, listing: Callable[[], Iterable[dict[str, Any]]]
    ) -> list[Submission]:
        """The job's batches its intents name or match uniquely in ``listing()``."""
        intents = self.read(job)
        known = [i for i in intents if i.get("batch_id")]
        found = [(i, str(i["batch_id"]), _epoch_iso(i["at"])) for i in known]
        open_intents = [i for i in intents if not i.get("batch_id")]
        if open_intents:
            matches = self.match(listing(), open_intents, {str(i["batch_id"]) for i in known})
            for intent in open_intents:
                batch = matches.get(intent_key(intent))
                if batch is not None:
                    found.append((intent, str(batch["id"]), str(batch.get("created_at", ""))))
        return [
            Submission(
                provider=provider,
                job=job,
                shard=str(intent["shard"]),
                attempt=int(intent["attempt"]),
                batch_id=batch_id,
                request_count=int(intent["count"]),
                content_hash=str(intent["hash"]),
                submitted_at=at,
                adopted=True,
            )
            for intent, batch_id, at in found
        ]


class IntentSettings(ProviderModel):
    """The settings of a provider that finds its batches by create intents: where they are
    kept and how a listed batch is matched to one."""

    intent_root: str = Field(
        default=DEFAULT_STORAGE,
        description="Storage root for create intents (crash recovery); the job's storage root.",
    )
    clock_skew_s: float = Field(
        default=60.0, description="Orphan matching: tolerated clock difference with the provider."
    )
    orphan_window_s: float = Field(
        default=900.0, description="Orphan matching: how long after an intent a batch may appear."
    )

    def intents(self, folder: str, count: Count, created: Created) -> CreateIntents:
        """The create intents under ``folder`` of each job's state."""
        return CreateIntents(
            self.intent_root,
            folder,
            count,
            created,
            clock_skew_s=self.clock_skew_s,
            window_s=self.orphan_window_s,
        )


def intent_key(intent: dict[str, Any]) -> str:
    return f"{intent['shard']}-{intent['attempt']}"


def iso_epoch(value: Any) -> float:
    """An ISO time (``2026-01-02T03:04:05Z``) as epoch seconds; 0 if it is none."""
    text = str(value or "").replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


def _epoch_iso(epoch: Any) -> str:
    return datetime.fromtimestamp(float(epoch)).astimezone().isoformat(timespec="seconds")
