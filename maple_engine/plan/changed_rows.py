"""Shards that hold only the rows a version sends: a rerun pays for what changed, no more.

A rerun of a living enrichment whose input is a file, and whose response store already holds
answers, cuts its shards in two passes over the input instead of one:

1. every row is rendered, checked and its request key spilled (`KeySpill`); nothing else is
   written;
2. the version is planned (`plan_version`: which rows are sent, which are filled from the
   store), then only the rows to send are cut into the version's shards: taken from the
   changed rows pass 1 rendered and kept in a local temporary folder (`KeptRows`), or, when a
   row to send is not among them or they were too many to keep, rendered again from the input.

The manifest then says ``layout: sparse`` and names the input, and the merge streams that input
and fills the other rows from the store (`maple_engine.merge.input_rows`). A first run (an empty
store), an upstream asset's table (the merge cannot read it again), a canary (it samples the
shards) and ``--no-reuse`` (every row is sent) keep one pass with every row in the shards.
"""

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.checks import check_input_schema, check_rows
from maple_engine.inputs.file_reads import FileReads
from maple_engine.inputs.files import block_rows
from maple_engine.inputs.sources import iter_blocks
from maple_engine.inputs.uploads import file_uploads
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
    return ResponseStore(job.state.storage, job.spec.name).holds_records()


#: Changed rows pass 1 keeps, rendered, for pass 2; past this many (a new prompt changes every
#: row), it keeps none and pass 2 reads the input again.
KEPT_ROWS = 500_000


class KeptRows:
    """Pass 1's rendered changed rows, one local Parquet file per input block in a temporary
    folder (removed on exit), so that pass 2 cuts its shards without reading and rendering
    the input again. It gives up (keeps nothing) past ``KEPT_ROWS`` rows or on a block its
    files cannot hold."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = KEPT_ROWS if limit is None else limit
        self.rows = 0
        self.files: list[str] | None = []
        self._folder = tempfile.TemporaryDirectory(prefix="maple-changed-rows-")

    def __enter__(self) -> "KeptRows":
        return self

    def __exit__(self, *exc: object) -> None:
        self._folder.cleanup()

    def add(self, prepared: pl.DataFrame) -> None:
        if self.files is None:
            return
        self.rows += prepared.height
        path = os.path.join(self._folder.name, f"{len(self.files):06d}.parquet")
        try:
            if self.rows > self.limit:
                raise ValueError("too many rows to keep")
            prepared.write_parquet(path, compression="lz4", statistics=False)
        except (ValueError, pl.exceptions.PolarsError, OSError):
            for written in [*self.files, path]:  # pass 2 reads the input: none is needed
                with contextlib.suppress(OSError):
                    os.remove(written)
            self.files = None
            return
        self.files.append(path)

    def sent(self, send: Mask, carried: Mask) -> Iterator[pl.DataFrame] | None:
        """The kept rows ``send`` marks, in row order; None when some row to send was not
        kept (a row carried over from the earlier version, whose answer is not in the
        store), or when nothing was kept."""
        if self.files is None or np.any(send & carried):
            return None
        return self._sent(self.files, send)

    @staticmethod
    def _sent(files: list[str], send: Mask) -> Iterator[pl.DataFrame]:
        for path in files:
            rows = pl.read_parquet(path)
            picked = send[rows.get_column(ROW_ID).to_numpy()]
            if np.any(picked):
                yield rows.filter(pl.Series(picked))


@dataclasses.dataclass(frozen=True)
class Spilled:
    """Pass 1's outcome: the input's row count, and the rows whose key was carried over from
    the earlier version ``earlier`` (None: every row was rendered)."""

    rows: int
    carried: Mask
    earlier: int | None


def spill_keys(job: Job, source: str, version: Version, kept: KeptRows | None = None) -> Spilled:
    """Pass 1: spill every row's request key. A row whose template
    columns are what they were at the same row id in an earlier version of the same settings
    (`maple_engine.plan.row_digests`) keeps that version's key; the other rows are rendered
    and checked (and kept in ``kept``, for pass 2)."""
    storage, spec = job.state.storage, job.spec
    earlier = earlier_digests(storage, spec, version.number)
    with (
        DigestWriter(storage, spec, version.number) as digests,
        KeySpill(storage, spec.name, version.number) as spill,
    ):
        rows, carried = _spill_changed(job, source, (spill, kept), digests, earlier)
        if earlier is not None and carried.any():
            for bucket in BUCKETS:
                keys = carried_keys(storage, spec.name, earlier.number, bucket, carried)
                if keys is not None:
                    spill.add(keys, bucket)
    if rows == 0:
        raise ConfigError("The input table has no rows: there is nothing to enrich.")
    return Spilled(rows, carried, earlier.number if earlier is not None else None)


def _spill_changed(
    job: Job,
    source: str,
    into: tuple[KeySpill, KeptRows | None],
    digests: DigestWriter,
    earlier: Earlier | None,
) -> tuple[int, Mask]:
    """Spill the keys of the rows not carried over from ``earlier`` (and keep those rows,
    rendered, if given where); the row count, and which rows are carried over."""
    spec = job.spec
    spill, kept = into
    _, max_bytes = shard_limits(spec, job.wire)
    aligned = AlignedDigests(job.state.storage, spec.name, earlier.number) if earlier else None
    uploads = file_uploads(job.state.storage, spec.provider, job.wire)
    reads = FileReads()  # a block's files, read for its digests, kept for its encoding
    offset, carried = 0, []
    try:
        for block in iter_blocks(source, block_rows(job.spec), job.state.storage.s3):
            if offset == 0:
                check_input_schema(block.schema, spec)
                if earlier is not None and stamp(spec, block.schema)["columns"] != earlier.columns:
                    aligned = None  # the columns' types changed: every row is rendered
            if block.height == 0:
                continue
            found = row_digests(block, digests.columns, spec, reads)
            digests.add(block, found)
            same = unchanged(found, aligned.take(block.height) if aligned else None)
            ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64, eager=True)
            changed = block.with_columns(ids.alias(ROW_ID)).filter(pl.Series(~same))
            if changed.height:
                prepared = prepare_rows(changed, spec, job.wire, uploads, reads)
                check_block(prepared, spec, max_bytes)
                check_rows(prepared, spec)
                spill.add(with_text(prepared, spec))
                if kept is not None:
                    kept.add(prepared)
            reads.clear()
            carried.append(same)
            offset += block.height
    finally:
        if aligned is not None:
            aligned.close()
    return offset, np.concatenate(carried) if carried else np.zeros(0, dtype=bool)


def cut_sent_rows(
    job: Job,
    source: str,
    version: Version,
    send: Mask,
    *,
    size: int | None = None,
    kept: tuple[KeptRows, Mask] | None = None,
) -> list[ShardInfo]:
    """Pass 2: the rows ``send`` marks cut into the version's shards (of at most ``size``
    requests when given): from the rows pass 1 kept (``kept``: them, and which rows were
    carried over) if they hold every one, else rendered again from the input."""
    blocks = kept[0].sent(send, kept[1]) if kept is not None else None
    if blocks is None:
        blocks = _sent_blocks(job, source, send)
    storage = job.state.storage
    return cut_shards(storage, job.spec, blocks, job.wire, key_for=version.shard_key, size=size)


def _sent_blocks(job: Job, source: str, send: Mask) -> Iterator[pl.DataFrame]:
    uploads = file_uploads(job.state.storage, job.spec.provider, job.wire)
    offset = 0
    for block in iter_blocks(source, block_rows(job.spec), job.state.storage.s3):
        picked = send[offset : offset + block.height]
        if np.any(picked):
            ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64, eager=True)
            rows = block.with_columns(ids.alias(ROW_ID)).filter(pl.Series(picked))
            yield prepare_rows(rows, job.spec, job.wire, uploads)
        offset += block.height
