"""Shards that hold only the rows a version sends: a rerun pays for what changed, no more.

A rerun of a living enrichment whose input is a file, and whose response store already holds
answers, cuts its shards in two passes over the input instead of one:

1. every row is rendered, checked and its request key spilled (`KeySpill`); nothing else is
   written;
2. the version is planned (`plan_version`: which rows are sent, which are filled from the
   store), then the input is read again and only the rows to send are rendered and cut into the
   version's shards.

The manifest then says ``layout: sparse`` and names the input, and the merge streams that input
and fills the other rows from the store (`maple_engine.merge.input_rows`). A first run (an empty
store), an upstream asset's table (the merge cannot read it again), a canary (it samples the
shards) and ``--no-reuse`` (every row is sent) keep one pass with every row in the shards.
"""

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.checks import check_context_window, check_input_schema
from maple_engine.inputs.sources import iter_blocks
from maple_engine.job import Job
from maple_engine.model import ROW_ID, ShardInfo, Version
from maple_engine.plan.row_digests import (
    AlignedDigests,
    DigestWriter,
    Earlier,
    carried_keys,
    earlier_digests,
    row_digests,
    stamp,
    unchanged,
)
from maple_engine.plan.sharding import (
    check_block,
    cut_shards,
    prepare_rows,
    shard_limits,
    with_text,
)
from maple_engine.plan.versions import KeySpill, Mask
from maple_engine.storage.response_store import BUCKETS, ResponseStore

#: The manifest's ``layout`` when its shards hold only the rows the version sends.
SPARSE = "sparse"


def only_changed_rows(job: Job, source: Any) -> bool:
    """True when this version's shards can hold only the rows to send."""
    if not isinstance(source, str) or not job.spec.reuse or job.spec.canary:
        return False
    store = ResponseStore(job.state.storage, job.spec.name)
    return any(store.files(bucket) for bucket in BUCKETS)


@dataclasses.dataclass(frozen=True)
class Spilled:
    """Pass 1's outcome: the input's row count, and the rows whose key was carried over from
    the earlier version ``earlier`` (None: every row was rendered)."""

    rows: int
    carried: Mask
    earlier: int | None


def spill_keys(job: Job, source: str, version: Version) -> Spilled:
    """Pass 1: spill every row's request key. A row whose template
    columns are what they were at the same row id in an earlier version of the same settings
    (`maple_engine.plan.row_digests`) keeps that version's key; the other rows are rendered
    and checked."""
    storage, spec = job.state.storage, job.spec
    earlier = earlier_digests(storage, spec, version.number)
    with (
        DigestWriter(storage, spec, version.number) as digests,
        KeySpill(storage, spec.name, version.number) as spill,
    ):
        rows, carried = _spill_changed(job, source, spill, digests, earlier)
        if earlier is not None and carried.any():
            for bucket in BUCKETS:
                kept = carried_keys(storage, spec.name, earlier.number, bucket, carried)
                if kept is not None:
                    spill.add(kept, bucket)
    if rows == 0:
        raise ConfigError("The input table has no rows: there is nothing to enrich.")
    return Spilled(rows, carried, earlier.number if earlier is not None else None)


def _spill_changed(
    job: Job, source: str, spill: KeySpill, digests: DigestWriter, earlier: Earlier | None
) -> tuple[int, Mask]:
    """Spill the keys of the rows not carried over from ``earlier``; the row count, and which
    rows are carried over."""
    spec = job.spec
    _, max_bytes = shard_limits(spec, job.provider)
    aligned = AlignedDigests(job.state.storage, spec.name, earlier.number) if earlier else None
    offset, carried = 0, []
    try:
        for block in iter_blocks(source, s3=job.state.storage.s3):
            if offset == 0:
                check_input_schema(block.schema, spec)
                if earlier is not None and stamp(spec, block.schema)["columns"] != earlier.columns:
                    aligned = None  # the columns' types changed: every row is rendered
            if block.height == 0:
                continue
            found = row_digests(block, digests.columns)
            digests.add(block, found)
            same = unchanged(found, aligned.take(block.height) if aligned else None)
            ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64, eager=True)
            changed = block.with_columns(ids.alias(ROW_ID)).filter(pl.Series(~same))
            if changed.height:
                prepared = prepare_rows(changed, spec, job.provider)
                check_block(prepared, spec, max_bytes)
                check_context_window(prepared, spec)
                spill.add(with_text(prepared, spec))
            carried.append(same)
            offset += block.height
    finally:
        if aligned is not None:
            aligned.close()
    return offset, np.concatenate(carried) if carried else np.zeros(0, dtype=bool)


def cut_sent_rows(
    job: Job, source: str, version: Version, send: Mask, size: int | None = None
) -> list[ShardInfo]:
    """Pass 2: the rows ``send`` marks, rendered again and cut into the version's shards (of at
    most ``size`` requests when given)."""
    blocks = _sent_blocks(job, source, send)
    storage = job.state.storage
    return cut_shards(storage, job.spec, blocks, job.provider, key_for=version.shard_key, size=size)


def _sent_blocks(job: Job, source: str, send: Mask) -> Iterator[pl.DataFrame]:
    offset = 0
    for block in iter_blocks(source, s3=job.state.storage.s3):
        picked = send[offset : offset + block.height]
        if np.any(picked):
            ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64, eager=True)
            rows = block.with_columns(ids.alias(ROW_ID)).filter(pl.Series(picked))
            yield prepare_rows(rows, job.spec, job.provider)
        offset += block.height
