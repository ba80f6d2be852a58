"""The response store: every answer an enrichment was given, keyed by its request key.

A request key is the SHA-256 (first 128 bits, hex) of the canonical request: the provider name
and the encoded request body, which holds the model, parameters, system prompt, rendered
prompt, image URL and response schema. Two rows with the same key are the same work.

Files: ``<root>/<job>/store/<shard>-a<attempt>.parquet`` (`maple_engine.storage.layout`), the
outcomes that one collection made final, grouped by key bucket (the key's first hex digit, 16
buckets): one row group per bucket, in bucket order. The store is the only copy of a final
answer: each record also names the row it answered (row and custom id, the attempt, whether it
was billed), and a shard's responses are read back from its collections' files
(`ResponseStore.collected`). A collection stored as a file per bucket,
``store/<b>/<shard>-a<attempt>.parquet`` (as earlier Maples wrote it), is read alike.

A collection writes its file before the shard's summary, so a shard never counts as collected
before its answers are durable; a rerun after a crash replaces the file of the same name (one
atomic write: the whole old file or the whole new one is there), then removes any per-bucket
files of that name. Stored outcomes are successes and failures with no retry left; rows that
merely never ran (expired, rate limited, not sent, out of quota) are not stored and are sent
again by a later run.

Lookups go one bucket at a time (one sixteenth of the keys), so memory stays flat however many
keys the store holds: a lookup reads that bucket's row group of each file, found by the
statistics of the key column.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import polars as pl
import polars_hash  # noqa: F401  (registers the ``chash`` expression namespace)

from maple_engine.errors import StorageError
from maple_engine.model import CUSTOM_ID, KEY, ROW_ID
from maple_engine.storage.layout import JobLayout, last_part
from maple_engine.storage.storage import Storage

BUCKETS = "0123456789abcdef"
#: store files of one shard read at once from S3 (each is a request); a local root reads them one
#: after another: in parallel, each reader's decoding buffers added up (1M rows of embeddings
#: merged at 60 MiB more peak memory) and cost more CPU
_READERS = 8
RECORD_COLUMNS = (
    "status",
    "failure_class",
    "error",
    "resendable",
    "response",
    "parsed",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "tokens_estimated",
    "cost_usd",
    "attempts",
    "batch_id",
)
_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    KEY: pl.String,
    "status": pl.String,
    "failure_class": pl.String,
    "error": pl.String,
    "resendable": pl.Boolean,  # False: a failure never sent again (`RESULT_SCHEMA`)
    "response": pl.String,
    "parsed": pl.String,
    "input_tokens": pl.Int64,
    "cached_input_tokens": pl.Int64,
    "cache_write_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "reasoning_tokens": pl.Int64,
    "tokens_estimated": pl.Boolean,
    "cost_usd": pl.Float64,
    "attempts": pl.Int64,
    "batch_id": pl.String,
    "model": pl.String,
    "at": pl.Float64,
}
#: The row a record answered, in the collection that stored it (not used by lookups by key).
ROW_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    ROW_ID: pl.Int64,
    CUSTOM_ID: pl.String,
    "billed": pl.Boolean,
    "attempt": pl.Int64,
}
_STORED = {**_SCHEMA, **ROW_COLUMNS}
#: Columns a store file written before they existed lacks: null there. Both readers fill them
#: (`scan` through its schema, `collected` through `_with_added`): tokens read as not reported,
#: ``resendable`` as null, which leaves a resend to the failure class's retries.
_ADDED = {"reasoning_tokens": pl.Int64, "tokens_estimated": pl.Boolean, "resendable": pl.Boolean}


def _with_added(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with every ``_ADDED`` column it lacks as nulls (a file from an older Maple)."""
    names = frame.collect_schema().names()
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in _ADDED.items() if c not in names]
    return frame.with_columns(missing) if missing else frame


def collection(shard: str, attempt: int) -> str:
    """The name of the files one collection (a shard's attempt) writes in each bucket."""
    return f"{shard}-a{attempt}"


def request_key(provider: str, request: pl.Expr) -> pl.Expr:
    """The request key of each encoded request: stable across versions (plain SHA-256)."""
    canonical = pl.concat_str([pl.lit(provider + "\x00"), request])
    hashed: pl.Expr = canonical.chash.sha2_256()  # type: ignore[attr-defined]
    return hashed.str.slice(0, 32)


def by_bucket(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """``frame`` (with a KEY column) split by key bucket, rows in order."""
    tagged = frame.with_columns(_bucket_of(pl.col(KEY)).alias("_bucket"))
    return tagged.partition_by("_bucket", maintain_order=True, include_key=False)


def _bucket_of(key: pl.Expr) -> pl.Expr:
    return key.str.slice(0, 1)


def _in_bucket(bucket: str) -> pl.Expr:
    """The keys of ``bucket``, as a range of the key column (which row-group statistics
    answer: a file's other buckets are not read)."""
    upper = BUCKETS[BUCKETS.index(bucket) + 1] if bucket != BUCKETS[-1] else "g"
    return (pl.col(KEY) >= bucket) & (pl.col(KEY) < upper)


class ResponseStore:
    """The answers of one enrichment (all its versions), under ``<root>/<job>/store``."""

    def __init__(self, storage: Storage, job: str) -> None:
        self.storage = storage
        self.job = job
        self.paths = JobLayout(job)

    def write(self, name: str, records: pl.DataFrame, model: str) -> None:
        """Store ``records`` (KEY, outcome and row columns) as ``<name>.parquet``, by bucket.

        The file replaces an earlier write's under that name, and its per-bucket files are
        removed after it: a collection run again after a crash leaves only its own records."""
        frame = records.select(KEY, *RECORD_COLUMNS, *ROW_COLUMNS).with_columns(
            pl.lit(model, pl.String).alias("model"), pl.lit(time.time()).alias("at")
        )
        frame = frame.cast(_STORED)  # type: ignore[arg-type]
        # rows in order within a bucket
        frame = frame.sort(_bucket_of(pl.col(KEY)), maintain_order=True)
        sizes = frame.group_by(_bucket_of(pl.col(KEY)), maintain_order=True).len()["len"].to_list()
        self.storage.write_parquet(self.paths.store_file(name), frame, row_groups=sizes)
        for bucket in self._bucket_folders():
            self.storage.delete(self.paths.store_bucket_file(bucket, name))

    def _listing(self) -> list[str]:
        return self.storage.list_keys(self.paths.store_dir())

    def _bucket_folders(self, listing: list[str] | None = None) -> list[str]:
        """The buckets that have a folder of per-bucket files (in ``listing``, the store's)."""
        names = (last_part(k) for k in (self._listing() if listing is None else listing))
        return [name for name in names if len(name) == 1 and name in BUCKETS]

    def holds_records(self) -> bool:
        """Whether any collection stored an outcome here (each file's row count is in its
        footer; the first that has rows answers)."""
        listing = self._listing()
        files = [k for k in listing if k.endswith(".parquet")]
        if any(self.storage.parquet_rows(k) for k in files):
            return True
        return any(self._bucket_files(b) for b in self._bucket_folders(listing))

    def _bucket_files(self, bucket: str) -> list[str]:
        keys = self.storage.list_keys(self.paths.store_bucket(bucket))
        return [k for k in keys if k.endswith(".parquet")]

    def scan(self, bucket: str) -> pl.LazyFrame:
        """Every stored record of one bucket (an empty frame if there is none), by key: the
        outcome columns, not the rows they answered."""
        listing = self._listing()
        scans = [
            self.storage.scan_parquet(k, schema=_SCHEMA).filter(_in_bucket(bucket))
            for k in listing
            if k.endswith(".parquet")
        ]
        if bucket in self._bucket_folders(listing):
            scans += [
                self.storage.scan_parquet(k, schema=_SCHEMA) for k in self._bucket_files(bucket)
            ]
        if not scans:
            return pl.LazyFrame(schema=_SCHEMA)
        return pl.concat(scans, how="vertical_relaxed")

    def collected(self, names: list[str]) -> pl.DataFrame:
        """The records the named collections stored, with the rows they answered (files written
        before records named their rows are skipped). The files are read a few at a time from
        S3 (each is a request), one at a time from local disk."""
        with ThreadPoolExecutor(max_workers=_READERS if self.storage.remote else 1) as pool:
            found = [p for parts in pool.map(self._collection, names) for p in parts]
        parts = [p for p in found if ROW_ID in p.columns]
        if not parts:
            return pl.DataFrame(schema=_STORED)
        return pl.concat(parts, how="diagonal_relaxed", rechunk=False)  # no copy of the answers

    def _collection(self, name: str) -> list[pl.DataFrame]:
        """One collection's records: its file, else its per-bucket files."""
        whole = self._read(self.paths.store_file(name))
        if whole is not None:
            return [whole]
        keys = [self.paths.store_bucket_file(b, name) for b in BUCKETS]
        return [p for p in map(self._read, keys) if p is not None]

    def _read(self, key: str) -> pl.DataFrame | None:
        try:
            return _with_added(self.storage.read_parquet(key).lazy()).collect()
        except StorageError:  # no such file (a collection stored nothing in this bucket)
            return None

    def usable_keys(self, bucket: str, *, retry_failed: bool) -> pl.LazyFrame:
        """Keys whose stored outcome a run takes instead of sending: successes, and final
        failures too unless the run retries failed rows."""
        records = self.scan(bucket)
        if retry_failed:
            records = records.filter(pl.col("status") == "succeeded")
        return records.select(KEY).unique()

    def best(self, bucket: str, keys: pl.LazyFrame) -> pl.DataFrame:
        """One record per key of ``keys``: a success if any, else the latest failure.

        Hash-based (no sort of the successes): most keys have one record, a success."""
        records = self.scan(bucket).join(keys.select(KEY).unique(), on=KEY, how="semi").collect()
        ok = pl.col("status") == "succeeded"
        successes = records.filter(ok).unique(KEY, keep="any")
        failures = records.filter(~ok).join(successes.select(KEY), on=KEY, how="anti")
        latest = failures.sort("at").unique(KEY, keep="last")
        return pl.concat([successes, latest]).drop("model", "at")
