"""The response store: every answer an enrichment was given, keyed by its request key.

A request key is the SHA-256 (first 128 bits, hex) of the canonical request: the provider name
and the encoded request body, which holds the model, parameters, system prompt, rendered
prompt, image URL and response schema. Two rows with the same key are the same work.

Files: ``<root>/<job>/store/<b>/<shard>-a<attempt>.parquet`` (`maple_engine.storage.layout`), the
outcomes that one collection made final, for the keys whose first hex digit is <b> (16 buckets).
The store is the only copy of a final answer: each record also names the row it answered (row
and custom id, the attempt, whether it was billed), and a shard's responses are read back from
its collections' files (`ResponseStore.collected`).

A collection writes its files before the shard's summary, so a shard never counts as collected
before its answers are durable; a rerun after a crash replaces the files of the same names.
Stored outcomes are successes and failures with no retry left; rows that merely never ran
(expired, rate limited, not sent, out of quota) are not stored and are sent again by a later run.

Lookups go one bucket at a time (one sixteenth of the keys), so memory stays flat however many
keys the store holds.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import polars as pl
import polars_hash  # noqa: F401  (registers the ``chash`` expression namespace)

from maple_engine.errors import StorageError
from maple_engine.model import CUSTOM_ID, KEY, ROW_ID
from maple_engine.storage.layout import JobLayout
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
    tagged = frame.with_columns(pl.col(KEY).str.slice(0, 1).alias("_bucket"))
    return tagged.partition_by("_bucket", maintain_order=True, include_key=False)


class ResponseStore:
    """The answers of one enrichment (all its versions), under ``<root>/<job>/store``."""

    def __init__(self, storage: Storage, job: str) -> None:
        self.storage = storage
        self.job = job

    def _bucket(self, bucket: str) -> str:
        return JobLayout(self.job).store_bucket(bucket)

    def write(self, name: str, records: pl.DataFrame, model: str) -> None:
        """Store ``records`` (KEY, outcome and row columns) as ``<bucket>/<name>.parquet``.

        The files replace all of an earlier write's under that name, also in the buckets these
        records miss: a collection run again after a crash leaves only its own records."""
        frame = records.select(KEY, *RECORD_COLUMNS, *ROW_COLUMNS).with_columns(
            pl.lit(model, pl.String).alias("model"), pl.lit(time.time()).alias("at")
        )
        frame = frame.cast(_STORED)  # type: ignore[arg-type]
        paths = JobLayout(self.job)
        written: set[str] = set()
        for part in by_bucket(frame) if frame.height else []:
            bucket = str(part[KEY][0])[0]
            self.storage.write_parquet(paths.store_file(bucket, name), part)
            written.add(bucket)
        for bucket in sorted(set(BUCKETS) - written):
            self.storage.delete(paths.store_file(bucket, name))

    def files(self, bucket: str) -> list[str]:
        return [k for k in self.storage.list_keys(self._bucket(bucket)) if k.endswith(".parquet")]

    def scan(self, bucket: str) -> pl.LazyFrame:
        """Every stored record of one bucket (an empty frame if there is none), by key: the
        outcome columns, not the rows they answered."""
        files = self.files(bucket)
        if not files:
            return pl.LazyFrame(schema=_SCHEMA)
        scans = [self.storage.scan_parquet(k, schema=_SCHEMA) for k in files]
        return pl.concat(scans, how="vertical_relaxed")

    def collected(self, names: list[str]) -> pl.DataFrame:
        """The records the named collections stored, with the rows they answered (files written
        before records named their rows are skipped). The files are read a few at a time from
        S3 (each is a request), one at a time from local disk."""
        paths = JobLayout(self.job)
        keys = [paths.store_file(b, name) for name in names for b in BUCKETS]
        with ThreadPoolExecutor(max_workers=_READERS if self.storage.remote else 1) as pool:
            found = list(pool.map(self._read, keys))
        parts = [p for p in found if p is not None and ROW_ID in p.columns]
        if not parts:
            return pl.DataFrame(schema=_STORED)
        return pl.concat(parts, how="diagonal_relaxed", rechunk=False)  # no copy of the answers

    def _read(self, key: str) -> pl.DataFrame | None:
        try:
            return _with_added(self.storage.read_parquet(key).lazy()).collect()
        except StorageError:  # the collection stored nothing in this bucket
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
