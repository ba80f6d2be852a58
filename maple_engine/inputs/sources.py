"""Streaming readers for the job's input: a CSV/Parquet path or URI, or an in-memory table."""

from collections.abc import Iterator

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from maple_engine.errors import ConfigError
from maple_engine.spec import file_format
from maple_engine.storage.probe import range_reads_refusal
from maple_engine.storage.s3 import ENVIRONMENT, S3Settings
from maple_engine.storage.storage import filesystem_for, is_remote, polars_storage_options
from maple_engine.storage.store_features import StoreLacks

BLOCK_ROWS = 50_000
CSV_BLOCK_BYTES = 8 << 20
LOST_BYTE = "\ufffd"  # what a byte that is not UTF-8 reads as


def scan(uri: str, s3: S3Settings | None = None) -> pl.LazyFrame:
    """A lazy scan of the input; CSV columns stay strings so values round-trip unchanged."""
    fmt = file_format(uri)
    options = polars_storage_options(uri, s3)
    if fmt == "csv":
        return pl.scan_csv(uri, infer_schema=False, storage_options=options)
    return pl.scan_parquet(uri, storage_options=options)


#: The ``llm_*`` columns the merge writes as numbers or booleans (the others are text)
OUTPUT_TYPES: dict[str, type[pl.DataType]] = {
    "llm_attempts": pl.Int64,
    "llm_input_tokens": pl.Int64,
    "llm_output_tokens": pl.Int64,
    "llm_cached_tokens": pl.Int64,
    "llm_cache_write_tokens": pl.Int64,
    "llm_reasoning_tokens": pl.Int64,
    "llm_tokens_estimated": pl.Boolean,
    "llm_cost_usd": pl.Float64,
    "llm_reused": pl.Boolean,
}


def scan_output(uri: str, s3: S3Settings | None = None) -> pl.LazyFrame:
    """A lazy scan of a merged output: as `scan`, but a CSV's ``llm_*`` counts, costs and
    flags read back as the numbers and booleans the merge wrote, not as text (the input's
    columns stay strings)."""
    if file_format(uri) != "csv":
        return scan(uri, s3)
    options = polars_storage_options(uri, s3)
    return pl.scan_csv(
        uri, infer_schema=False, schema_overrides=OUTPUT_TYPES, storage_options=options
    )


def row_count(source: str | pl.DataFrame | pa.Table, s3: S3Settings | None = None) -> int:
    """The input's rows (a file is scanned, not loaded)."""
    if isinstance(source, str):
        return int(scan(source, s3).select(pl.len()).collect().item())
    return len(source)


def input_columns(uri: str, s3: S3Settings | None = None) -> list[str]:
    return input_schema(uri, s3).names()


def input_schema(uri: str, s3: S3Settings | None = None) -> pl.Schema:
    """The input's columns; a CSV header that is not UTF-8 (read as U+FFFD by polars) is
    refused naming its line, as a body line would be."""
    try:
        schema = scan(uri, s3).collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise unreadable(
            uri, exc, s3, "Give a readable CSV (with a header row) or Parquet file."
        ) from exc
    lost = file_format(uri) == "csv" and any(LOST_BYTE in name for name in schema.names())
    if lost and _first_invalid_utf8(uri, s3) is not None:  # not a U+FFFD written as such
        raise unreadable(uri, ValueError("invalid utf-8 in the header"), s3, "")
    return schema


def iter_blocks(
    source: str | pl.DataFrame | pa.Table, rows: int = BLOCK_ROWS, s3: S3Settings | None = None
) -> Iterator[pl.DataFrame]:
    """The input in blocks of about ``rows`` rows, never the whole file at once (``s3``: how
    an ``s3://`` input is reached)."""
    if isinstance(source, pa.Table):
        yield from pl.DataFrame(source).iter_slices(rows)
        return
    if isinstance(source, pl.DataFrame):
        yield from source.iter_slices(rows)
        return
    try:
        yield from _read_blocks(source, rows, s3)
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise unreadable(source, exc, s3, "Give a readable CSV or Parquet file.") from exc


def unreadable(uri: str, exc: Exception, s3: S3Settings | None, fix: str) -> ConfigError:
    """The error for an input that cannot be read; a CSV that is not UTF-8 names its first bad
    line (found by reading the file again, only on this error path). An input on an S3 store
    that does not honour range reads is not blamed: the error names the store."""
    if is_remote(uri):
        lacking = range_reads_refusal(uri, "The input", s3 or ENVIRONMENT)
        if lacking is not None:
            return StoreLacks(lacking)
    bad = _first_invalid_utf8(uri, s3) if "utf" in str(exc).lower() else None
    if bad is None:
        return ConfigError(f"Cannot read the input {uri!r}: {exc}. {fix}")
    line, column, byte = bad
    return ConfigError(
        f"Cannot read the input {uri!r}: line {line:,} is not valid UTF-8 (byte 0x{byte:02x} "
        f"at byte {column:,} of the line). Save the file as UTF-8 (e.g. iconv -f latin1 -t "
        "utf-8) or give a Parquet file."
    )


def _first_invalid_utf8(uri: str, s3: S3Settings | None) -> tuple[int, int, int] | None:
    """(line, byte position within it, the byte) of the first invalid UTF-8 in a CSV."""
    if file_format(uri) != "csv":
        return None
    fs, path = filesystem_for(uri, s3)
    with fs.open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return number, exc.start + 1, line[exc.start]
    return None


def _read_blocks(uri: str, rows: int, s3: S3Settings | None) -> Iterator[pl.DataFrame]:
    """Pull-based readers (pyarrow): the next block is read only when asked for.

    polars' ``collect_batches`` runs its engine ahead of the consumer and can buffer the whole
    input, so peak memory would grow with the file; these readers hold one block (a Parquet
    row group slice, or a CSV block of ``CSV_BLOCK_BYTES``) at a time.
    """
    fs, path = filesystem_for(uri, s3)
    with fs.open(path, "rb") as handle:
        if file_format(uri) == "parquet":
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=rows):
                yield _frame(batch)
            return
        names = input_columns(uri, s3)
        reader = pacsv.open_csv(
            handle,
            read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=True,  # an empty field is null, as polars reads it
                quoted_strings_can_be_null=False,  # "" stays an empty string
            ),
        )
        for batch in reader:
            yield _frame(batch)


def _frame(batch: pa.RecordBatch) -> pl.DataFrame:
    frame = pl.from_arrow(batch)
    assert isinstance(frame, pl.DataFrame)
    return frame
