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

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.sources import iter_blocks
from maple_engine.job import Job
from maple_engine.plan.sharding import (
    ShardInfo,
    checked_blocks,
    cut_shards,
    prepare_rows,
    shard_limits,
    with_text,
)
from maple_engine.plan.versions import KeySpill, Mask, Version
from maple_engine.spec import ROW_ID
from maple_engine.storage.response_store import BUCKETS, ResponseStore

#: The manifest's ``layout`` when its shards hold only the rows the version sends.
SPARSE = "sparse"


def only_changed_rows(job: Job, source: Any) -> bool:
    """True when this version's shards can hold only the rows to send."""
    if not isinstance(source, str) or not job.spec.reuse or job.spec.canary:
        return False
    store = ResponseStore(job.state.storage, job.spec.name)
    return any(store.files(bucket) for bucket in BUCKETS)


def spill_keys(job: Job, source: str, version: Version) -> int:
    """Pass 1: render and check every row and spill its request key; the input's row count."""
    storage, spec = job.state.storage, job.spec
    _, max_bytes = shard_limits(spec, job.provider)
    rows = 0
    with KeySpill(storage, spec.name, version.number) as spill:
        blocks = iter_blocks(source, s3=storage.s3)
        for offset, block in checked_blocks(blocks, spec, job.provider, max_bytes):
            spill.add(with_text(block, spec))
            rows = offset + block.height
    if rows == 0:
        raise ConfigError("The input table has no rows: there is nothing to enrich.")
    return rows


def cut_sent_rows(job: Job, source: str, version: Version, send: Mask) -> list[ShardInfo]:
    """Pass 2: the rows ``send`` marks, rendered again and cut into the version's shards."""
    blocks = _sent_blocks(job, source, send)
    return cut_shards(job.state.storage, job.spec, blocks, job.provider, key_for=version.shard_key)


def _sent_blocks(job: Job, source: str, send: Mask) -> Iterator[pl.DataFrame]:
    offset = 0
    for block in iter_blocks(source, s3=job.state.storage.s3):
        picked = send[offset : offset + block.height]
        if np.any(picked):
            ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64, eager=True)
            rows = block.with_columns(ids.alias(ROW_ID)).filter(pl.Series(picked))
            yield prepare_rows(rows, job.spec, job.provider)
        offset += block.height
