"""The durable state of a job under the storage root, and what each shard needs next.

Where each file lives: `maple_engine.storage.layout.JobLayout`.
"""

import dataclasses
from typing import Any, Literal

import polars as pl

from maple_engine.model import LineTally, ShardInfo, StopKind, Submission, Version
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class ShardSummary:
    attempt: int
    pending_retry: int
    final: bool
    succeeded: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    max_requests: int = 0  # after a batch was rejected as too large: cap per attempt (0: none)
    #: over the shard's attempts so far (`maple_engine.collect.accounting.LineTally`): requests
    #: a batch that ran every request had no line for, lines beyond one per request, lines for
    #: requests the batch was not sent
    lines_missing: int = 0
    lines_duplicated: int = 0
    lines_unknown: int = 0

    def tally(self) -> LineTally:
        return LineTally(self.lines_missing, self.lines_duplicated, self.lines_unknown)


@dataclasses.dataclass(frozen=True)
class ShardProgress:
    """What a shard needs next: ``submit`` attempt n, ``wait`` for its batch, or ``done``."""

    key: str
    attempt: int
    action: str  # submit | wait | done
    submission: Submission | None
    summary: ShardSummary | None


class JobState:
    def __init__(self, storage: Storage, job: str) -> None:
        self.storage = storage
        self.job = job
        self.paths = JobLayout(job)

    # -- spec and manifest ------------------------------------------------------------------
    def read_spec(self) -> dict[str, Any] | None:
        key = self.paths.spec
        if not self.storage.exists(key):
            return None
        return dict(self.storage.read_json(key))

    def write_spec(self, spec: dict[str, Any]) -> None:
        self.storage.write_json(self.paths.spec, spec)

    def manifest_record(self) -> dict[str, Any] | None:
        key = self.paths.manifest
        return dict(self.storage.read_json(key)) if self.storage.exists(key) else None

    def manifest(self) -> list[ShardInfo] | None:
        record = self.manifest_record()
        return None if record is None else [ShardInfo(**s) for s in record["shards"]]

    def unsharded_rows(self) -> int:
        """Input rows of the current version that no shard holds: a version whose shards hold
        only the rows it sends (`maple_engine.plan.changed_rows`) fills the others from the
        response store; 0 when the shards hold every row."""
        record = self.manifest_record()
        if record is None or not record.get("rows"):
            return 0
        return int(record["rows"]) - sum(int(s["rows"]) for s in record["shards"])

    def write_manifest(self, shards: list[ShardInfo], **info: Any) -> None:
        record = {"shards": [dataclasses.asdict(s) for s in shards], **info}
        self.storage.write_json(self.paths.manifest, record)

    def version(self) -> Version | None:
        key = self.paths.version
        return Version(**self.storage.read_json(key)) if self.storage.exists(key) else None

    def write_version(self, version: Version) -> None:
        self.storage.write_json(self.paths.version, version.to_json())

    def version_copy(self, number: int) -> tuple[dict[str, Any], bytes] | None:
        """Which rows of version ``number`` copy their answer from the last merged output: the
        record (the output, its identity, the mask's length) and the packed row mask."""
        record = self._record(self.paths.version_copy(number))
        if record is None:
            return None
        return record, self.storage.read_bytes(self.paths.version_copied(number))

    def write_version_copy(self, number: int, record: dict[str, Any], mask: bytes) -> None:
        self.storage.write_bytes(self.paths.version_copied(number), mask)
        self.storage.write_json(self.paths.version_copy(number), record)  # last: it says "done"

    def clear_version_copy(self, number: int) -> None:
        self.storage.delete(self.paths.version_copy(number))

    def shard_frame(self, key: str, columns: list[str] | None = None) -> pl.DataFrame:
        return self.storage.read_parquet(self.paths.shard_file(key), columns=columns)

    def scan_shard(self, key: str) -> pl.LazyFrame:
        return self.storage.scan_parquet(self.paths.shard_file(key))

    def output_uri(self, fmt: str) -> str:
        """Where the merged output goes when the job names no output path."""
        return self.storage.uri(self.paths.output(fmt))

    # -- attempts ---------------------------------------------------------------------------
    def submissions(self, shard: str) -> list[Submission]:
        keys = [
            k
            for k in self.storage.list_keys(self.paths.shard_dir(shard))
            if self.paths.is_submission(k)
        ]
        subs = [Submission.from_json(self.storage.read_json(k)) for k in keys]
        return sorted(subs, key=lambda s: s.attempt)

    def submission(self, shard: str, attempt: int) -> Submission | None:
        key = self.paths.submission(shard, attempt)
        return (
            Submission.from_json(self.storage.read_json(key)) if self.storage.exists(key) else None
        )

    def record_submission(self, sub: Submission) -> None:
        self.storage.write_json(self.paths.submission(sub.shard, sub.attempt), sub.to_json())

    def plan(self, shard: str, attempt: int) -> pl.DataFrame | None:
        key = self.paths.plan(shard, attempt)
        return self.storage.read_parquet(key) if self.storage.exists(key) else None

    def plan_rows(self, shard: str, attempt: int) -> int | None:
        """The rows of the attempt's plan, read from the file's footer (None: no plan)."""
        key = self.paths.plan(shard, attempt)
        return self.storage.parquet_rows(key) if self.storage.exists(key) else None

    def write_plan(self, shard: str, attempt: int, custom_ids: pl.DataFrame) -> None:
        self.storage.write_parquet(self.paths.plan(shard, attempt), custom_ids)

    def results(self, shard: str, attempt: int) -> pl.DataFrame:
        return self.storage.read_parquet(self.paths.results(shard, attempt))

    def write_results(self, shard: str, attempt: int, frame: pl.DataFrame) -> None:
        self.storage.write_parquet(self.paths.results(shard, attempt), frame)

    def estimate_record(self, shard: str, attempt: int) -> dict[str, Any] | None:
        """The kept estimate of one attempt (requests and tokens), None before it was made."""
        key = self.paths.estimate(shard, attempt)
        return dict(self.storage.read_json(key)) if self.storage.exists(key) else None

    def write_estimate_record(self, shard: str, attempt: int, record: dict[str, Any]) -> None:
        self.storage.write_json(self.paths.estimate(shard, attempt), record)

    def summary(self, shard: str) -> ShardSummary | None:
        key = self.paths.summary(shard)
        return ShardSummary(**self.storage.read_json(key)) if self.storage.exists(key) else None

    def write_summary(self, shard: str, summary: ShardSummary) -> None:
        self.storage.write_json(self.paths.summary(shard), dataclasses.asdict(summary))

    # -- job-level records ------------------------------------------------------------------
    def _record(self, key: str) -> dict[str, Any] | None:
        return dict(self.storage.read_json(key)) if self.storage.exists(key) else None

    def merged_record(self) -> dict[str, Any] | None:
        """The last merge: output path, rows, version, totals (None before the first)."""
        return self._record(self.paths.merged)

    def write_merged_record(self, record: dict[str, Any]) -> None:
        self.storage.write_json(self.paths.merged, record)

    def canary_record(self) -> dict[str, Any] | None:
        return self._record(self.paths.canary)

    def write_canary_record(self, record: dict[str, Any]) -> None:
        self.storage.write_json(self.paths.canary, record)

    def queue_wait_record(self) -> dict[str, Any] | None:
        """Why the job's next shard waits for queue room (or what the deadline did)."""
        return self._record(self.paths.queue_wait)

    def write_queue_wait(self, record: dict[str, Any]) -> None:
        self.storage.write_json(self.paths.queue_wait, record)

    def clear_queue_wait(self) -> None:
        if self.storage.exists(self.paths.queue_wait):  # a sensor's listing answers this
            self.storage.delete(self.paths.queue_wait)

    def chain_held(self, now: float) -> bool:
        """A chained submissions run holds the job's waiting shards at ``now``: it sends them
        in order itself, so no other run is asked to (`maple_engine.submit.queue.Chain`)."""
        record = self._record(self.paths.chain)
        return record is not None and float(record.get("until", 0)) > now

    def hold_chain(self, until: float) -> None:
        self.storage.write_json(self.paths.chain, {"until": until})

    def release_chain(self) -> None:
        if self.storage.exists(self.paths.chain):
            self.storage.delete(self.paths.chain)

    def interrupted(self) -> bool:
        """A Ctrl-C stopped the job's driver, and no run of the job started since."""
        return self.storage.exists(self.paths.interrupted)

    def mark_interrupted(self, reason: str) -> None:
        self.storage.write_json(self.paths.interrupted, {"reason": reason})

    def clear_interrupted(self) -> None:
        self.storage.delete(self.paths.interrupted)

    def cancel_record(
        self, why: Literal["deadline", "stall"], shard: str, attempt: int
    ) -> dict[str, Any] | None:
        """The record of attempt ``attempt``'s batch cancelled for ``why``, if it was."""
        return self._record(self._cancel_key(why, shard, attempt))

    def write_cancel_record(
        self, why: Literal["deadline", "stall"], shard: str, attempt: int, record: dict[str, Any]
    ) -> None:
        self.storage.write_json(self._cancel_key(why, shard, attempt), record)

    def _cancel_key(self, why: Literal["deadline", "stall"], shard: str, attempt: int) -> str:
        if why == "deadline":
            return self.paths.deadline_cancel(shard, attempt)
        return self.paths.stall_cancel(shard, attempt)

    # -- job-level stop ---------------------------------------------------------------------
    def stop_record(self) -> dict[str, str] | None:
        return self._record(self.paths.stop)

    def is_stopped(self) -> bool:
        """Is the job stopped (no new submission, no further real-time send)?"""
        return self.storage.exists(self.paths.stop)

    def stop_reason(self) -> str | None:
        record = self.stop_record()
        return str(record["reason"]) if record is not None else None

    def stop(self, reason: str, kind: StopKind = StopKind.STOP) -> None:
        """Stop new submissions, for a reason of ``kind`` (the first stop wins)."""
        if self.stop_reason() is None:
            self.storage.write_json(self.paths.stop, {"reason": reason, "kind": kind.value})

    def stop_kind(self) -> StopKind | None:
        """The kind of the job's stop, None when it is not stopped (an unknown kind: STOP)."""
        record = self.stop_record()
        if record is None:
            return None
        kind = record.get("kind", StopKind.STOP.value)
        return StopKind(kind) if kind in StopKind._value2member_map_ else StopKind.STOP

    def budget_stop(self) -> float | None:
        """The budget a budget stop was hit at (None: no such stop was recorded)."""
        record = self._record(self.paths.budget_stop)
        return None if record is None else float(record["budget_usd"])

    def write_budget_stop(self, budget: float) -> None:
        self.storage.write_json(self.paths.budget_stop, {"budget_usd": budget})

    def clear_budget_stop(self) -> None:
        self.storage.delete(self.paths.budget_stop)

    def clear_stop(self, kinds: tuple[StopKind, ...] | None = None) -> str | None:
        """Lift the stop (only if its kind is in ``kinds``, when given); the lifted reason."""
        record = self.stop_record()
        if record is None or (kinds is not None and self.stop_kind() not in kinds):
            return None
        self.storage.delete(self.paths.stop)
        return str(record["reason"])

    # -- progress ---------------------------------------------------------------------------
    def progress(self, shard: str) -> ShardProgress:
        """Derive the shard's next step from its files (no provider call)."""
        summary = self.summary(shard)
        collected = summary.attempt if summary else 0
        latest = self.submission(shard, collected + 1)
        if latest is not None:
            return ShardProgress(shard, latest.attempt, "wait", latest, summary)
        if summary is None or (summary.pending_retry and self.stop_reason() is None):
            return ShardProgress(shard, collected + 1, "submit", None, summary)
        return ShardProgress(shard, collected, "done", None, summary)
