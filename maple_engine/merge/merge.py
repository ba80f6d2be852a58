"""merged: the input columns unchanged and in order, then the ``llm_*`` columns, streamed."""

import dataclasses
import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from maple_engine.errors import ConfigError
from maple_engine.model import CUSTOM_ID, EMBEDDING_COLUMN, INTERNAL_COLUMNS, ROW_ID
from maple_engine.providers.vectors import base64_length
from maple_engine.spec import file_format
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import atomic_write, filesystem_for, is_remote


@dataclasses.dataclass(frozen=True)
class OutputTable:
    """Where the merged output lives; the IO manager hands downstream assets a lazy scan of it."""

    path: str
    format: str
    rows: int


#: Usage columns of the prompt cache: of ``llm_input_tokens``, those read from the provider's
#: cache and those written to it.
CACHE_COLUMNS = {
    "cached_input_tokens": "llm_cached_tokens",
    "cache_write_tokens": "llm_cache_write_tokens",
}


def llm_columns(
    responses: pl.DataFrame, model: str, structured: bool, vector_length: int | None = None
) -> list[pl.Expr]:
    """The ``llm_*`` columns: a reply (``llm_response``, maybe ``llm_parsed``) and its output
    tokens, or with ``vector_length`` the ``llm_embedding`` vector; then the per-row facts."""
    ok = pl.col("status") == "succeeded"
    if vector_length is not None:
        columns = [embedding_expr(ok, vector_length)]
    else:
        columns = [pl.when(ok).then(pl.col("response")).otherwise(None).alias("llm_response")]
    if structured:
        columns.append(pl.col("parsed").alias("llm_parsed"))
    columns += [
        pl.col("status").alias("llm_status"),
        pl.when(ok).then(None).otherwise(pl.col("failure_class")).alias("llm_failure_class"),
        pl.when(ok).then(None).otherwise(pl.col("error")).alias("llm_error"),
        pl.col("attempts").cast(pl.Int64).alias("llm_attempts"),
        pl.when(ok)
        .then(pl.col("input_tokens"))
        .otherwise(None)
        .cast(pl.Int64)
        .alias("llm_input_tokens"),
    ]
    if vector_length is None:  # a reply's output tokens, and the prompt cache's share
        output = pl.when(ok).then(pl.col("output_tokens")).otherwise(None).cast(pl.Int64)
        columns.append(output.alias("llm_output_tokens"))
        columns += [
            pl.when(ok).then(pl.col(tokens)).otherwise(None).cast(pl.Int64).alias(column)
            for tokens, column in CACHE_COLUMNS.items()
        ]
        reasoning = pl.when(ok).then(pl.col("reasoning_tokens")).otherwise(None).cast(pl.Int64)
        columns.append(reasoning.alias("llm_reasoning_tokens"))
    estimated = (
        pl.col("tokens_estimated").fill_null(False)
        if "tokens_estimated" in responses.columns
        else pl.lit(False)
    )
    columns.append(pl.when(ok).then(estimated).otherwise(None).alias("llm_tokens_estimated"))
    columns += [
        pl.col("cost_usd").cast(pl.Float64).alias("llm_cost_usd"),
        pl.lit(model, pl.String).alias("llm_model"),
        pl.col("batch_id").cast(pl.String).alias("llm_batch_id"),
        pl.col("reused").fill_null(False).cast(pl.Boolean).alias("llm_reused"),
    ]
    return columns


def embedding_expr(ok: pl.Expr, length: int) -> pl.Expr:
    """``llm_embedding``: the base64 float32 response as Arrow ``fixed_size_list<float32>``."""
    raw = pl.when(ok).then(pl.col("response")).otherwise(None).str.decode("base64")
    vector = raw.bin.reinterpret(dtype=pl.Array(pl.Float32, length), endianness="little")
    return vector.alias(EMBEDDING_COLUMN)


def check_vector_lengths(responses: pl.DataFrame, length: int) -> None:
    """Every vector has ``length`` float32 values (one model, one dimension per job)."""
    encoded = base64_length(length)  # no decoding needed
    ok = responses.filter(pl.col("status") == "succeeded")
    wrong = ok.filter(pl.col("response").str.len_bytes() != encoded)
    if wrong.height:
        row = wrong.row(0, named=True)
        size = vector_length(wrong.head(1))
        raise ConfigError(
            f"Row {row[ROW_ID]}'s embedding has {size} values where the job's others have {length} "
            f"({wrong.height} such row(s) in this shard): rerun with --dimensions {length} "
            "(or --no-reuse) so that every row is embedded alike."
        )


def vector_length(responses: pl.DataFrame) -> int | None:
    """The length of the first vector among ``responses``, None when none succeeded."""
    ok = responses.filter(pl.col("status") == "succeeded").head(1)
    if ok.is_empty():
        return None
    return int(ok.select(pl.col("response").str.decode("base64").bin.size()).item()) // 4


def merge_shard(
    shard: pl.DataFrame,
    responses: pl.DataFrame,
    model: str,
    parsed: pl.DataType | None,
    vector: int | None = None,
) -> pl.DataFrame:
    """Join one shard's input rows with its responses, in input order (``vector``: an
    embedding's length)."""
    inputs = [c for c in shard.columns if c not in INTERNAL_COLUMNS]
    if vector is not None:
        check_vector_lengths(responses, vector)
    joined = shard.select([*inputs, ROW_ID]).join(
        responses.drop(CUSTOM_ID, strict=False), on=ROW_ID, how="left", maintain_order="left"
    )
    merged = joined.select(*inputs, *llm_columns(joined, model, parsed is not None, vector))
    if parsed is not None:
        decoded = pl.col("llm_parsed").str.json_decode(parsed)
        ok = pl.col("llm_status") == "succeeded"  # a failed row's llm_parsed is null, not {null}
        merged = merged.with_columns(pl.when(ok).then(decoded).otherwise(None).alias("llm_parsed"))
    return merged


class OutputWriter:
    """Appends frames to one Parquet or CSV file on local disk or S3, then commits it.

    Nothing is committed if the writing raises (see
    ``maple_engine.storage.storage.atomic_write``)."""

    def __init__(
        self,
        path: str,
        fmt: str,
        input_schema: pa.Schema | None = None,
        s3: S3Settings | None = None,
    ) -> None:
        self.path = path
        self.fmt = fmt
        self.input_schema = input_schema
        self.fs, self._target = filesystem_for(path, s3)
        self._commit = atomic_write(self.fs, self._target)
        self._handle: IO[bytes] | None = None
        self._parquet: pq.ParquetWriter | None = None
        self.rows = 0

    def __enter__(self) -> "OutputWriter":
        self._handle = self._commit.__enter__()
        return self

    def write(self, frame: pl.DataFrame) -> None:
        assert self._handle is not None
        if self.fmt == "csv":
            frame = frame.with_columns(pl.col(pl.Struct).struct.json_encode())
            frame.write_csv(self._handle, include_header=self.rows == 0)
        else:
            table = frame.to_arrow()
            if self._parquet is None:
                schema = keep_input_types(table, self.input_schema)
                self._parquet = pq.ParquetWriter(
                    self._handle,
                    schema,
                    compression=compression(schema),
                    use_dictionary=dictionary_columns(frame),
                )
            self._parquet.write_table(table.cast(self._parquet.schema))
        self.rows += frame.height

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._parquet is not None:  # its footer goes nowhere if the write is discarded
                self._parquet.close()
        except BaseException:
            self._commit.__exit__(*sys.exc_info())
            raise
        self._commit.__exit__(exc_type, exc, tb)


def compression(schema: pa.Schema) -> str | dict[str, str]:
    """zstd for every column but embeddings: model vectors are float noise to zstd (7-10%
    smaller, at a third of the whole merge's write time for 1M x 256)."""
    if EMBEDDING_COLUMN not in schema.names:
        return "zstd"
    return {name: "none" if name == EMBEDDING_COLUMN else "zstd" for name in schema.names}


#: A column gets dictionary pages when its first block holds at most this share of distinct
#: values (statuses, the model, a category of the input); unique text (answers, titles) gets
#: none: pyarrow would fill a dictionary page only to fall back from it, which costs in writing
#: and again in every read (1M rows of the scale benchmark's output: 0.97 -> 0.52 s to write,
#: 1.56 -> 0.83 s to read, 10.3 -> 6.6 MB).
REPEATING = 0.1


def dictionary_columns(frame: pl.DataFrame) -> list[str]:
    """The flat columns of ``frame`` whose values repeat (``REPEATING``)."""
    flat = [name for name, dtype in frame.schema.items() if not dtype.is_nested()]
    if not flat or frame.is_empty():
        return flat
    distinct = frame.select(pl.col(flat).n_unique()).row(0)
    return [name for name, n in zip(flat, distinct, strict=True) if n <= REPEATING * frame.height]


def keep_input_types(table: pa.Table, input_schema: pa.Schema | None) -> pa.Schema:
    """``table``'s schema with the input's own Arrow type for every input column.

    polars hands back ``large_string`` for ``string``, ``large_list`` for ``list`` and so on;
    the output keeps what the input said. A column whose type cannot be restored keeps polars'.
    """
    if input_schema is None:
        return table.schema
    fields = []
    for field in table.schema:
        index = input_schema.get_field_index(field.name)
        original = input_schema.field(index) if index >= 0 else None
        keep = original is not None and original.type != field.type and _castable(table, original)
        fields.append(field.with_type(original.type) if keep and original else field)
    return pa.schema(fields)


def _castable(table: pa.Table, field: pa.Field) -> bool:
    try:
        table.column(field.name).cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


def parquet_schema(source: str | None, s3: S3Settings | None = None) -> pa.Schema | None:
    """The Arrow schema of a Parquet input (read from its footer), else None."""
    if source is None or file_format(source, strict=False) != "parquet":
        return None
    fs, path = filesystem_for(source, s3)
    with fs.open(path, "rb") as handle:
        return pq.read_schema(handle)


def write_merged(
    frames: Iterator[pl.DataFrame],
    path: str,
    fmt: str,
    source: str | None = None,
    s3: S3Settings | None = None,
) -> OutputTable:
    """Stream ``frames`` into ``path``; a Parquet ``source``'s column types are kept (``s3``:
    how ``s3://`` paths are reached). Each frame is encoded and written on a second thread
    while the next one is made (pyarrow and polars release the GIL): memory holds two."""
    with (
        OutputWriter(path, fmt, parquet_schema(source, s3), s3) as writer,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        writing: Future[None] | None = None
        for frame in frames:
            if writing is not None:
                writing.result()
            writing = pool.submit(writer.write, frame)
        if writing is not None:
            writing.result()
    # pyarrow's allocator keeps what the encoding freed; given back, the asset checks that
    # read the output next do not add their memory on top (60-80 MiB at 1M rows)
    pa.default_memory_pool().release_unused()
    shown = path if is_remote(path) else os.path.abspath(path)  # where it is, from anywhere
    return OutputTable(path=shown, format=fmt, rows=writer.rows)
