"""input_shards for a living enrichment: resume the current version or start the next one.

See `maple_engine.plan.versions` for what a version is and how its rows are chosen.
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.file_reads import FileReads
from maple_engine.inputs.files import block_rows
from maple_engine.inputs.sources import iter_blocks, row_count
from maple_engine.job import Job
from maple_engine.model import ShardInfo, StopKind, Version
from maple_engine.plan.cache_layout import check_cache_price
from maple_engine.plan.changed_rows import (
    SPARSE,
    KeptRows,
    cut_sent_rows,
    only_changed_rows,
    spill_keys,
)
from maple_engine.plan.copied_answers import plan_copies
from maple_engine.plan.row_digests import DigestWriter, row_digests
from maple_engine.plan.sharding import with_text, write_shards
from maple_engine.plan.turnaround import Sizing
from maple_engine.plan.versions import KeySpill, Mask, VersionPlan, attempt_one, job_input_digest
from maple_engine.plan.versions import plan_version as plan_rows
from maple_engine.state import ShardSummary
from maple_engine.storage.claims import sharding_lease

#: what runs on a new version's shards before its rows are planned (the canary,
#: `maple_engine.canary.run_canary`: its answers then fill their rows from the store)
BeforePlanning = Callable[[Job, list[ShardInfo]], object]
#: what chooses a new version's shard size from its rows to send (counted on demand) and its
#: start (`maple_engine.submit.sizing.size_shards`); None from it, or no sizer: the limits
Sizer = Callable[[Job, Callable[[], int], float], Sizing | None]
Hooks = tuple[BeforePlanning | None, Sizer | None]


def shard_input(
    job: Job,
    source: Any,
    *,
    retry_failed: bool = False,
    before_planning: BeforePlanning | None = None,
    sizer: Sizer | None = None,
) -> tuple[list[ShardInfo], Version, VersionPlan]:
    """The current version's shards: resumed if the input and settings are unchanged, else a
    new version cut from the input (in shards of the size ``sizer`` chooses, if it does), with
    attempt-1 plans holding only the rows to send.
    One run cuts a job's shards at a time (`maple_engine.storage.claims.sharding_lease`)."""
    # an unknown model, or a cached prefix on a model nothing prices reads for, is an error
    # before anything is sent
    check_cache_price(job.spec, job.price())
    with sharding_lease(job.state.storage, job.state.paths.sharding):
        return _shard_input(job, source, retry_failed, (before_planning, sizer))


def _shard_input(
    job: Job, source: Any, retry_failed: bool, hooks: "Hooks"
) -> tuple[list[ShardInfo], Version, VersionPlan]:
    current = job.state.version()
    wanted = Version(
        number=0,
        fingerprint=job.spec.fingerprint(),
        input_digest=job_input_digest(source, job.spec, job.state.storage.s3),
        reuse=job.spec.reuse,
        retry_failed=retry_failed,
        created_at=time.time(),
    )
    if current is not None and current.same_run(wanted) and not _redo(job, current):
        record = job.state.manifest_record()
        if record is not None and record.get("version") == current.number:
            return job.state.manifest() or [], current, _counts(record)
        version = current  # the version's sharding was interrupted: cut it again
    else:
        version = _start(job, current, wanted)
    return _cut(job, version, source, hooks)


def _redo(job: Job, current: Version) -> bool:
    """A finished version is run again (not resumed) when the run forces sending."""
    if not (current.retry_failed or not current.reuse):
        return False
    merged = job.state.merged_record()
    return merged is not None and merged.get("version") == current.number


def _start(job: Job, current: Version | None, wanted: Version) -> Version:
    _check_settled(job)
    number = current.number + 1 if current is not None else _first_number(job)
    version = Version(**{**wanted.to_json(), "number": number})
    job.state.write_version(version)
    job.state.write_spec(
        {
            "fingerprint": version.fingerprint,
            "created_at": version.created_at,
            "version": number,
            "spec": job.spec.to_json(),
        }
    )
    job.state.clear_stop()  # a stop (budget, quota, cancel, age) belonged to the last version
    job.state.clear_budget_stop()
    return version


def _first_number(job: Job) -> int:
    """1, or 2 when the job holds shards of a run made before versions existed."""
    return 2 if job.state.manifest_record() is not None else 1


def _check_settled(job: Job) -> None:
    """A new version must not start while the last one has batches out (they would be lost)."""
    if job.state.stop_kind() is StopKind.CANCEL:
        return  # cancelled: its batches were stopped at the provider
    waiting = [
        s.key for s in job.state.manifest() or [] if job.state.progress(s.key).action == "wait"
    ]
    if waiting:
        raise ConfigError(
            f"Job {job.spec.name!r} still has {len(waiting)} batch(es) of its previous run out "
            f"at the provider (shards {', '.join(waiting[:5])}), and the input or settings "
            "have changed since. Finish that run first (rerun it with its previous input and "
            f"settings; its answers are then reused), or `maple cancel {job.spec.name}` to "
            "drop it; then run this again."
        )


def _cut(
    job: Job, version: Version, source: Any, hooks: "Hooks"
) -> tuple[list[ShardInfo], Version, VersionPlan]:
    before_planning, sizer = hooks
    storage, name = job.state.storage, job.spec.name
    if only_changed_rows(job, source):
        with KeptRows() as kept:
            spilled = spill_keys(job, source, version, kept)
            stored = np.zeros(spilled.rows, dtype=bool)
            counts, send = plan_rows(storage, name, version, spilled.rows, stored)
            sizing = sizer(job, lambda: int(send.sum()), version.created_at) if sizer else None
            size = sizing.size if sizing else None
            shards = cut_sent_rows(
                job, source, version, send, size=size, kept=(kept, spilled.carried)
            )
        if shards:  # else nothing to send: every row in the shards, as below
            plan_copies(job, version.number, spilled.earlier, spilled.carried, stored)
            return _planned(
                job, version, shards, counts, send, sizing=sizing, layout=SPARSE, source=source
            )
    sizing = None
    if sizer is not None:
        sizing = sizer(job, lambda: row_count(source, storage.s3), version.created_at)
    with (
        DigestWriter(storage, job.spec, version.number) as digests,
        KeySpill(storage, name, version.number) as spill,
    ):
        reads = FileReads()  # a block's files, read for its requests, kept for its digests

        def on_block(block: pl.DataFrame) -> None:
            spill.add(with_text(block, job.spec))
            if isinstance(source, str):  # only a file's next version reads them
                digests.add(block, row_digests(block, digests.columns, job.spec, reads))
            reads.clear()

        shards = write_shards(
            storage,
            job.spec,
            iter_blocks(source, block_rows(job.spec), storage.s3),
            job.wire,
            key_for=version.shard_key,
            on_block=on_block,
            size=sizing.size if sizing else None,
            reads=reads,
        )
    rows = shards[-1].last_row + 1
    if before_planning is not None:
        before_planning(job, shards)
    counts, send = plan_rows(storage, name, version, rows)
    return _planned(job, version, shards, counts, send, sizing=sizing)


def _planned(
    job: Job,
    version: Version,
    shards: list[ShardInfo],
    counts: VersionPlan,
    send: Mask,
    *,
    sizing: Sizing | None = None,
    **layout: str,
) -> tuple[list[ShardInfo], Version, VersionPlan]:
    """Write each shard's attempt-1 plan (the rows it sends) and the version's manifest (with
    the chosen shard size and why, `maple_engine.submit.sizing`)."""
    for shard in shards:
        plan = attempt_one(send, shard.first_row, shard.last_row)
        job.state.write_plan(shard.key, 1, plan)
        if plan.is_empty():  # every row filled from the store: nothing to send
            job.state.write_summary(shard.key, ShardSummary(0, 0, True))
    job.state.write_manifest(
        shards,
        version=version.number,
        rows=counts.rows,
        sent=counts.sent,
        reused=counts.reused,
        duplicates=counts.duplicates,
        **({"sizing": sizing.to_json()} if sizing is not None else {}),
        **layout,
    )
    return shards, version, counts


def _counts(record: dict[str, Any]) -> VersionPlan:
    rows = int(record.get("rows") or sum(s["rows"] for s in record["shards"]))
    return VersionPlan(
        rows=rows,
        sent=int(record.get("sent", rows)),
        reused=int(record.get("reused", 0)),
        duplicates=int(record.get("duplicates", 0)),
    )
