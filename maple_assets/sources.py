"""Streaming readers for the job's input: a CSV/Parquet path or URI, or an in-memory table."""

from collections.abc import Iterator

import polars as pl
import pyarrow as pa

from maple_assets.spec import file_format
from resources.errors import ConfigError
from resources.storage import polars_storage_options

BLOCK_ROWS = 50_000


def scan(uri: str) -> pl.LazyFrame:
    """A lazy scan of the input; CSV columns stay strings so values round-trip unchanged."""
    fmt = file_format(uri)
    options = polars_storage_options(uri)
    if fmt == "csv":
        return pl.scan_csv(uri, infer_schema=False, storage_options=options)
    return pl.scan_parquet(uri, storage_options=options)


def input_columns(uri: str) -> list[str]:
    try:
        return scan(uri).collect_schema().names()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ConfigError(
            f"Cannot read the input {uri!r}: {exc}. Give a readable CSV (with a header row) "
            "or Parquet file."
        ) from exc


def iter_blocks(
    source: str | pl.DataFrame | pa.Table, rows: int = BLOCK_ROWS
) -> Iterator[pl.DataFrame]:
    """The input in blocks of about ``rows`` rows, never the whole file at once."""
    if isinstance(source, pa.Table):
        yield from pl.DataFrame(source).iter_slices(rows)
        return
    if isinstance(source, pl.DataFrame):
        yield from source.iter_slices(rows)
        return
    try:
        yield from scan(source).collect_batches(chunk_size=rows)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ConfigError(
            f"Cannot read the input {source!r}: {exc}. Give a readable CSV or Parquet file."
        ) from exc
