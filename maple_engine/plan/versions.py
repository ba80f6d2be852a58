"""Versions of a living enrichment: which rows a run sends, and which it fills from the store.

A job name names an enrichment, not one frozen run. Each materialization of ``input_shards``
derives the job's requests from the current input and settings. If they are what the current
version was made from (same settings fingerprint, same input digest, same reuse flags), the run
resumes that version, so an interrupted run never pays twice; otherwise it starts version n+1.
A version's shards (keys ``s00000`` for version 1, ``v<n>-s00000`` after) hold every input row,
or only the rows it sends (`maple_engine.plan.changed_rows`); its attempt-1 plans hold only the
rows to send:

- a row whose request key has a stored outcome (`maple_engine.storage.response_store`) is filled
from the store
  (successes always; final failures too, unless the run retries failed rows);
- of the rows with the same new key, the first is sent and the others are filled with its answer;
- with reuse off, every row is sent.

Its files (keys, fills) are laid out by `maple_engine.storage.layout.JobLayout`.
"""

import contextlib
import dataclasses
import hashlib
from typing import IO, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from maple_engine.inputs.files import files_stamp
from maple_engine.model import CUSTOM_ID, KEY, ROW_ID, Version
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.response_store import BUCKETS, ResponseStore, by_bucket
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import Storage, filesystem_for

_KEYS_SCHEMA = pa.schema([(ROW_ID, pa.int64()), (KEY, pa.large_string())])
FILL_ROW_GROUP = 8_192
#: A version's key spill and fills are written once and read once, by the same version: lz4
#: (hex keys hardly compress; at 1M rows it spends about half zstd's CPU), and no dictionary
#: pages: the keys are unique, so pyarrow's writer filled a dictionary only to fall back from it
#: (1M keys: 0.38 -> 0.30 s to write, 0.51 -> 0.16 s to read).
WORK_PARQUET: dict[str, Any] = {"compression": "lz4", "use_dictionary": False}


# -- input digest ---------------------------------------------------------------------------
def input_digest(source: Any, s3: S3Settings | None = None) -> str:
    """A digest of the input's content: the file's bytes (local), the object's ETag and size
    (S3), or the table's Arrow IPC stream (an upstream asset's table)."""
    if isinstance(source, str):
        fs, path = filesystem_for(source, s3)
        if "://" in source and not source.startswith("file://"):
            info = fs.info(path)
            tag = f"{info.get('ETag') or info.get('etag')}:{info.get('size')}:{source}"
            return hashlib.sha256(tag.encode()).hexdigest()[:32]
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()[:32]
    table = source.to_arrow() if isinstance(source, pl.DataFrame) else source
    sink = _HashSink()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=65_536):
            writer.write_batch(batch)
    return sink.hash.hexdigest()[:32]


def job_input_digest(source: Any, spec: JobSpec, s3: S3Settings | None = None) -> str:
    """`input_digest`, and for a job with files the digest of what its cells point at too
    (`maple_engine.inputs.files.files_stamp`)."""
    digest = input_digest(source, s3)
    if not spec.file_columns:
        return digest
    both = f"{digest}:{files_stamp(source, spec, s3)}"
    return hashlib.sha256(both.encode()).hexdigest()[:32]


class _HashSink:
    """A write-only file object that hashes what is written (nothing is kept)."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.hash.update(view)
        return view.nbytes

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


# -- key spill while sharding ---------------------------------------------------------------
class KeySpill:
    """Row ids and request keys of every row, appended to one Parquet file per key bucket."""

    def __init__(self, storage: Storage, job: str, number: int) -> None:
        self.storage = storage
        self.paths = JobLayout(job)
        self.number = number
        self.prefix = self.paths.version_keys_dir(number)
        self._stack = contextlib.ExitStack()
        self._writers: dict[str, pq.ParquetWriter] = {}

    def __enter__(self) -> "KeySpill":
        self._stack.__enter__()
        self.storage.delete(self.prefix)  # a resumed sharding starts these files over
        return self

    def add(self, block: pl.DataFrame, bucket: str | None = None) -> None:
        """Spill ``block``'s row ids and keys (``bucket``: the one bucket they all fall in)."""
        frame = block.select(ROW_ID, KEY)
        for part in by_bucket(frame) if bucket is None else [frame]:
            into = bucket or str(part[KEY][0])[0]
            self._writer(into).write_table(part.to_arrow().cast(_KEYS_SCHEMA))

    def _writer(self, bucket: str) -> pq.ParquetWriter:
        if bucket not in self._writers:
            handle: IO[bytes] = self._stack.enter_context(
                self.storage.open_write(self.paths.version_keys(self.number, bucket))
            )
            writer = pq.ParquetWriter(handle, _KEYS_SCHEMA, **WORK_PARQUET)
            self._stack.callback(writer.close)
            self._writers[bucket] = writer
        return self._writers[bucket]

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)


# -- planning: which rows a version sends -----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class VersionPlan:
    rows: int
    sent: int
    reused: int  # filled from answers stored before this version
    duplicates: int  # filled from the answer of an identical request sent by this version


Mask = np.ndarray[Any, np.dtype[np.bool_]]


def plan_version(
    storage: Storage, job: str, version: Version, rows: int, stored: Mask | None = None
) -> tuple[VersionPlan, Mask]:
    """Decide, bucket by bucket, which rows are sent, and write the fill keys of the others.

    Returns the counts and the send mask (one byte per input row: flat, whatever the store
    holds; each bucket's keys are looked up on their own). ``stored``, if given, marks the
    rows filled from answers stored before this version."""
    store = ResponseStore(storage, job)
    send = np.zeros(rows, dtype=bool)
    reused = duplicates = 0
    paths = JobLayout(job)
    for bucket in BUCKETS:
        key = paths.version_keys(version.number, bucket)
        fill_key = paths.version_fill(version.number, bucket)
        storage.delete(fill_key)
        if not storage.exists(key):
            continue
        staged = storage.read_parquet(key).sort(ROW_ID)  # rows carried over come last
        if not version.reuse:
            send[staged[ROW_ID].to_numpy()] = True
            continue
        known = store.usable_keys(bucket, retry_failed=version.retry_failed).collect()
        fresh = staged.join(known, on=KEY, how="anti") if known.height else staged
        # the spill holds rows in row order: the first of identical requests is the one sent
        # (a filter, not a group_by: a third of the memory at 10M rows)
        first = fresh.filter(pl.col(KEY).is_first_distinct()).get_column(ROW_ID)
        if stored is not None:
            stored[staged.get_column(ROW_ID).to_numpy()] = True
            stored[fresh.get_column(ROW_ID).to_numpy()] = False
        send[first.to_numpy()] = True
        reused += staged.height - fresh.height
        duplicates += fresh.height - first.len()
        fill = staged.filter(~pl.Series(send[staged[ROW_ID].to_numpy()]))
        if fill.height:
            with storage.open_write(fill_key) as handle:
                pq.write_table(fill.to_arrow(), handle, **WORK_PARQUET)
    counts = VersionPlan(rows=rows, sent=int(send.sum()), reused=reused, duplicates=duplicates)
    return counts, send


def marked(ids: np.ndarray[Any, Any], mask: Mask) -> Mask:
    """Which of the row ids ``ids`` ``mask`` marks (an id past its end: not marked)."""
    found = np.zeros(len(ids), dtype=bool)
    inside = ids < len(mask)
    found[inside] = mask[ids[inside]]
    return found


def attempt_one(send: Mask, first: int, last: int) -> pl.DataFrame:
    """The attempt-1 plan of the shard holding rows ``first..last``: row and custom ids."""
    ids = np.flatnonzero(send[first : last + 1]).astype(np.int64) + first
    frame = pl.DataFrame({ROW_ID: ids}, schema={ROW_ID: pl.Int64})
    return frame.with_columns(
        pl.concat_str([pl.lit("r"), pl.col(ROW_ID).cast(pl.String)]).alias(CUSTOM_ID)
    )


# -- fills at merge time ----------------------------------------------------------------------
def prepare_fills(storage: Storage, job: str, number: int, skip: Mask | None = None) -> None:
    """Join every bucket's unsent rows with their stored records, sorted by row id (``skip``:
    rows answered otherwise, left out)."""
    store = ResponseStore(storage, job)
    paths = JobLayout(job)
    for bucket in BUCKETS:
        fill_key = paths.version_fill(number, bucket)
        out = paths.version_fills(number, bucket)
        if not storage.exists(fill_key):
            storage.delete(out)
            continue
        fill = storage.read_parquet(fill_key)
        if skip is not None:
            fill = fill.filter(pl.Series(~marked(fill.get_column(ROW_ID).to_numpy(), skip)))
        if fill.is_empty():
            storage.delete(out)
            continue
        records = store.best(bucket, fill.lazy())
        # the spill holds rows in row order, and so does the fill (no sort needed)
        joined = fill.join(records, on=KEY, how="left", maintain_order="left").drop(KEY)
        with storage.open_write(out) as handle:
            pq.write_table(
                joined.to_arrow(),
                handle,
                **WORK_PARQUET,
                row_group_size=FILL_ROW_GROUP,
            )


def shard_fills(storage: Storage, job: str, number: int, first: int, last: int) -> pl.DataFrame:
    """The filled rows ``first..last`` of a version (read through row-group statistics)."""
    parts = [
        storage.scan_parquet(k).filter(pl.col(ROW_ID).is_between(first, last))
        for k in storage.list_keys(JobLayout(job).version_fills_dir(number))
        if k.endswith(".parquet")
    ]
    if not parts:
        return pl.DataFrame()
    return pl.concat(parts, how="diagonal_relaxed").collect().sort(ROW_ID)


def filled_failures(storage: Storage, job: str, number: int) -> pl.DataFrame:
    """The rows of a version filled from the store whose stored outcome is a failure, with its
    class (``row_id``, ``failure_class``), read from the store as it is now: what the rows of
    a shard answered wholly from the store will show in merged."""
    store = ResponseStore(storage, job)
    paths = JobLayout(job)
    parts = [pl.DataFrame(schema={ROW_ID: pl.Int64, "failure_class": pl.String})]
    for bucket in BUCKETS:
        fill_key = paths.version_fill(number, bucket)
        if not storage.exists(fill_key):
            continue
        fill = storage.read_parquet(fill_key)
        records = store.best(bucket, fill.lazy()).filter(pl.col("status") == "failed")
        failed = fill.join(records.select(KEY, "failure_class"), on=KEY, how="inner")
        parts.append(failed.select(pl.col(ROW_ID).cast(pl.Int64), "failure_class"))
    return pl.concat(parts).sort(ROW_ID)
