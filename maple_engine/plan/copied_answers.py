"""Answers carried over from the previous merged output: a rerun copies the answers of its
unchanged rows instead of looking each up again in the response store.

When a sparse version (`maple_engine.plan.changed_rows`) is planned, a row qualifies if its
template columns are unchanged at the same row id since the version that wrote the last merged
output (`maple_engine.plan.row_digests`), so its request key is that row's, and its key has a
stored outcome, so it is filled, not sent. Its answer is then the one that output shows at the
same row. The plan records which rows qualify (``versions/<n>/copied.bin``, one bit a row) and
which output (``versions/<n>/copy.json``: version, path, size and modification time or ETag).

The merge streams that output's ``llm_*`` columns beside the input, turns them back into
stored records (``llm_reused`` true, as for any filled row) and looks up only the other filled
rows in the store. If the output is not the file the record names (rewritten, removed, another
row count), every filled row comes from the store as before. Only Parquet outputs of chat jobs
without a response schema are read back (a CSV's types and a decoded ``llm_parsed`` do not
round-trip exactly).
"""

from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from maple_engine.job import Job
from maple_engine.model import REUSED, ROW_ID
from maple_engine.plan.versions import Mask
from maple_engine.spec import file_format
from maple_engine.storage.row_stream import RowStream
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import filesystem_for

#: Stored record columns and the output columns that show them.
RECORDS = {
    "status": "llm_status",
    "failure_class": "llm_failure_class",
    "error": "llm_error",
    "response": "llm_response",
    "attempts": "llm_attempts",
    "input_tokens": "llm_input_tokens",
    "output_tokens": "llm_output_tokens",
    "reasoning_tokens": "llm_reasoning_tokens",
    "tokens_estimated": "llm_tokens_estimated",
    "cached_input_tokens": "llm_cached_tokens",
    "cache_write_tokens": "llm_cache_write_tokens",
    "cost_usd": "llm_cost_usd",
    "batch_id": "llm_batch_id",
}


#: Output columns an output written before they existed lacks: null there.
ABSENT_TYPES = {"llm_reasoning_tokens": pl.Int64, "llm_tokens_estimated": pl.Boolean}


def output_identity(path: str, s3: S3Settings | None = None) -> dict[str, Any]:
    """What tells a written output file from any later one at the same path."""
    fs, target = filesystem_for(path, s3)
    info = fs.info(target)
    return {
        "size": info.get("size"),
        "etag": info.get("ETag") or info.get("etag"),
        "mtime": str(info.get("mtime") or info.get("LastModified") or ""),
    }


def recorded_identity(path: str, s3: S3Settings | None = None) -> dict[str, Any] | None:
    """``output_identity`` for ``merged.json``; None if the file cannot be looked at (a next
    version then fills every row from the store)."""
    try:
        return output_identity(path, s3)
    except OSError:
        return None


def plan_copies(job: Job, number: int, earlier: int | None, carried: Mask, stored: Mask) -> None:
    """Record which rows of version ``number`` take their answer from the last merged output."""
    job.state.clear_version_copy(number)
    previous = _previous_output(job, earlier)
    if previous is None:
        return
    copied = carried & stored[: len(carried)]
    copied[previous["rows"] :] = False
    if not copied.any():
        return
    record = {**previous, "mask_rows": len(copied)}
    job.state.write_version_copy(number, record, np.packbits(copied).tobytes())


def _previous_output(job: Job, earlier: int | None) -> dict[str, Any] | None:
    """The last merged output, if its rows are version ``earlier``'s and it can be read back
    (its answers are text that ``RECORDS`` copies: no vectors, no parsed replies)."""
    spec = job.spec
    if earlier is None or spec.kind.answer != "text" or spec.response_schema is not None:
        return None
    merged = job.state.merged_record()
    if merged is None:
        return None
    path, identity = merged.get("path"), merged.get("identity")
    if merged.get("version") != earlier or identity is None or not path:
        return None
    if file_format(str(path), strict=False) != "parquet":
        return None
    record = {"version": earlier, "path": path, "rows": merged["rows"], "identity": identity}
    return record if _intact(record, job.state.storage.s3) else None


def _intact(record: dict[str, Any], s3: S3Settings | None) -> bool:
    try:
        return bool(output_identity(record["path"], s3) == record["identity"])
    except (OSError, ValueError):  # removed, or unreadable
        return False


class PreviousAnswers:
    """The copied rows' answers, streamed from the previous output in row order."""

    def __init__(self, record: dict[str, Any], mask: bytes, s3: S3Settings | None) -> None:
        bits = np.frombuffer(mask, dtype=np.uint8)
        self.mask: Mask = np.unpackbits(bits, count=int(record["mask_rows"])).astype(bool)
        fs, target = filesystem_for(record["path"], s3)
        handle = fs.open(target, "rb")
        present = set(pq.read_schema(handle).names)
        handle.seek(0)
        # an output written before a column existed (llm_reasoning_tokens) gives nulls there
        self._absent = [c for c in ABSENT_TYPES if c not in present]
        columns = [c for c in RECORDS.values() if c not in self._absent]
        self._rows = RowStream(handle, columns=columns)
        self._offset = 0

    @classmethod
    def open(cls, job: Job, number: int) -> "PreviousAnswers | None":
        """The version's copied answers, if it has some and their output is still intact."""
        copy = job.state.version_copy(number) if number else None
        if copy is None:
            return None
        record, mask = copy
        s3 = job.state.storage.s3
        return cls(record, mask, s3) if _intact(record, s3) else None

    def take(self, rows: int) -> pl.DataFrame:
        """The stored records of the copied rows among the next ``rows`` rows."""
        first = self._offset
        self._offset += rows
        table = self._rows.take(rows)
        if table is None or not self.mask[first : first + table.num_rows].any():
            return pl.DataFrame()
        frame = pl.DataFrame(table).with_columns(
            pl.int_range(first, first + table.num_rows, dtype=pl.Int64).alias(ROW_ID),
            *(pl.lit(None, ABSENT_TYPES[c]).alias(c) for c in self._absent),
        )
        picked = frame.filter(pl.Series(self.mask[first : first + table.num_rows]))
        return picked.select(
            ROW_ID,
            *(pl.col(column).alias(record) for record, column in RECORDS.items()),
            pl.lit(True).alias(REUSED),
        )

    def close(self) -> None:
        self._rows.close()
