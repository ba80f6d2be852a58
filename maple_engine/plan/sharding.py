"""input_shards: render one request per row and cut the stream into shard Parquet files."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl

from maple_engine.crashpoints import crash_point
from maple_engine.errors import ConfigError
from maple_engine.inputs.checks import check_input_schema, check_rows
from maple_engine.inputs.file_reads import FileReads
from maple_engine.inputs.files import FILE_KEY_PARTS, FILE_PARTS, with_files
from maple_engine.inputs.templates import parse_template, render_expr
from maple_engine.inputs.uploads import FileUploads, file_uploads
from maple_engine.model import CUSTOM_ID, KEY, REQUEST, ROW_ID, ShardInfo, shard_key
from maple_engine.plan.cache_layout import cache_layout
from maple_engine.plan.shards import ShardCutter
from maple_engine.providers.base import RequestSpec, Wire
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.response_store import request_key
from maple_engine.storage.storage import Storage


def request_spec(spec: JobSpec) -> RequestSpec:
    return RequestSpec(
        model=spec.model,
        system=spec.system,
        params=dict(spec.params),
        response_schema=spec.response_schema,
        cache=cache_layout(spec).sends_hints,
        cache_key=spec.cache_key(),
        kind=spec.kind,
        dimensions=spec.dimensions,
        endpoint=spec.endpoint,
    )


def prepare_block(
    block: pl.DataFrame,
    offset: int,
    spec: JobSpec,
    provider: Wire,
    uploads: FileUploads | None = None,
    *,
    reads: FileReads | None = None,
) -> pl.DataFrame:
    """Add row id, custom id, the encoded request, its request key and its size (``_size``);
    files the provider takes by id go up through ``uploads`` (`maple_engine.inputs.uploads`),
    files are read through ``reads`` where given."""
    ids = pl.int_range(offset, offset + block.height, dtype=pl.Int64)
    return prepare_rows(block.with_columns(ids.alias(ROW_ID)), spec, provider, uploads, reads)


def prepare_rows(
    block: pl.DataFrame,
    spec: JobSpec,
    provider: Wire,
    uploads: FileUploads | None = None,
    reads: FileReads | None = None,
) -> pl.DataFrame:
    """`prepare_block` for rows that carry their row id already (``ROW_ID``); their files
    read through ``reads`` where given (which may hold them from the block's plan)."""
    parts = parse_template(spec.template)
    image = pl.col(spec.image_column).cast(pl.String) if spec.image_column else None
    files = pl.col(FILE_PARTS) if spec.file_columns else None
    body = provider.body_expr(request_spec(spec), render_expr(parts), image, files)
    keyed = body
    if spec.file_columns:  # an upload's reference keyed as its file's digest
        keyed = provider.body_expr(
            request_spec(spec), render_expr(parts), image, pl.col(FILE_KEY_PARTS)
        )
    framed = with_files(block, spec, uploads, reads).with_columns(
        pl.concat_str([pl.lit("r"), pl.col(ROW_ID).cast(pl.String)]).alias(CUSTOM_ID),
        body.alias(REQUEST),
        request_key(spec.provider, keyed).alias(KEY),
    )
    if spec.file_columns:
        framed = framed.drop(FILE_PARTS, FILE_KEY_PARTS)
    return framed.with_columns(
        provider.line_bytes_expr(pl.col(CUSTOM_ID), pl.col(REQUEST)).cast(pl.Int64).alias("_size"),
    )


def with_text(block: pl.DataFrame, spec: JobSpec) -> pl.DataFrame:
    """The rows of a prepared block that are sent: for a kind that skips empty texts (an
    embedding), those whose text is not empty or blank (an empty text is never sent nor paid;
    its row is ``empty_text``)."""
    if not spec.kind.skips_empty:
        return block
    text = render_expr(parse_template(spec.template))
    return block.filter(text.is_not_null() & (text.str.strip_chars() != ""))


def check_block(block: pl.DataFrame, spec: JobSpec, limit: int) -> None:
    too_big = block.filter(pl.col("_size") > limit)
    if too_big.height:
        row = too_big.row(0, named=True)
        raise ConfigError(
            f"Row {row[ROW_ID]} renders a request of {row['_size']:,} bytes, over the batch "
            f"file limit of {limit:,} bytes ({too_big.height} such row(s) in this block). "
            + _shorten(spec, row)
        )


def _shorten(spec: JobSpec, row: dict[str, Any]) -> str:
    """What makes the row smaller: its text, or its files (named)."""
    files = [str(row[c]) for c in spec.file_columns if row.get(c)]
    if files:
        return f"Its files ({', '.join(files)[:300]}) are too large: send smaller ones."
    return "Shorten the prompt or the row's text."


def checked_blocks(
    blocks: Iterable[pl.DataFrame],
    spec: JobSpec,
    provider: Wire,
    max_bytes: int,
    uploads: FileUploads | None = None,
    *,
    reads: FileReads | None = None,
) -> Iterator[tuple[int, pl.DataFrame]]:
    """Each non-empty input block as the job encodes it (``prepare_block``, its files taken by
    id through ``uploads`` and read through ``reads``), with its first row's offset, after the
    checks that must pass before anything is uploaded."""
    offset = 0
    for block in blocks:
        if offset == 0:
            check_input_schema(block.schema, spec)
        if block.height == 0:
            continue
        prepared = prepare_block(block, offset, spec, provider, uploads, reads=reads)
        check_block(prepared, spec, max_bytes)
        check_rows(prepared, spec)
        yield offset, prepared
        offset += block.height


def write_shards(
    storage: Storage,
    spec: JobSpec,
    blocks: Iterator[pl.DataFrame],
    provider: Wire,
    *,
    key_for: Callable[[int], str] = shard_key,
    on_block: Callable[[pl.DataFrame], None] | None = None,
    size: int | None = None,
    reads: FileReads | None = None,
) -> list[ShardInfo]:
    """Stream blocks into shard files; memory holds at most one shard plus one block.

    ``key_for`` names the shard at an index; ``on_block`` sees every prepared block; ``size``
    caps the requests per shard below the limits (`maple_engine.submit.sizing`); ``reads``
    reads the blocks' files (``on_block`` may read them again from it)."""
    _, max_bytes = shard_limits(spec, provider)
    uploads = file_uploads(storage, spec.provider, provider)
    checked = checked_blocks(blocks, spec, provider, max_bytes, uploads, reads=reads)
    prepared = (block for _, block in checked)
    seen = prepared if on_block is None else _seen(prepared, on_block)
    shards = cut_shards(storage, spec, seen, provider, key_for=key_for, size=size)
    if not shards:
        raise ConfigError("The input table has no rows: there is nothing to enrich.")
    return shards


def shard_limits(spec: JobSpec, provider: Wire, size: int | None = None) -> tuple[int, int]:
    """The requests and bytes one shard may hold: the job's limits within the provider's (and
    within ``size``, a chosen shard size)."""
    limits = provider.limits()
    return (
        min(spec.max_requests_per_batch, limits.max_requests, size or limits.max_requests),
        min(spec.max_batch_bytes, limits.max_bytes),
    )


def _seen(
    blocks: Iterator[pl.DataFrame], on_block: Callable[[pl.DataFrame], None]
) -> Iterator[pl.DataFrame]:
    for block in blocks:
        on_block(block)
        yield block


def cut_shards(
    storage: Storage,
    spec: JobSpec,
    prepared_blocks: Iterable[pl.DataFrame],
    provider: Wire,
    *,
    key_for: Callable[[int], str] = shard_key,
    size: int | None = None,
) -> list[ShardInfo]:
    """Cut prepared (`prepare_rows`) and checked blocks into shard files, in order (none for
    no rows), of at most ``size`` requests each when given."""
    cutter = ShardCutter(*shard_limits(spec, provider, size))
    shards: list[ShardInfo] = []
    pending: list[pl.DataFrame] = []
    pending_shard = 0

    def flush() -> None:
        if pending:
            frame = pl.concat(pending)
            shards.append(_write_shard(storage, spec.name, key_for(pending_shard), frame))
            pending.clear()

    for prepared in prepared_blocks:
        sizes = prepared.get_column("_size").to_numpy().astype(np.int64)
        for piece in cutter.feed(sizes):
            if piece.shard != pending_shard:
                flush()
                pending_shard = piece.shard
            pending.append(prepared.slice(piece.start, piece.stop - piece.start))
            if piece.closes:
                flush()
                pending_shard = piece.shard + 1
    flush()
    return shards


def _write_shard(storage: Storage, job: str, key: str, frame: pl.DataFrame) -> ShardInfo:
    size = int(frame.get_column("_size").sum())
    storage.write_parquet(JobLayout(job).shard_file(key), frame.drop("_size"))
    crash_point("shard_written")
    return ShardInfo(
        key=key,
        rows=frame.height,
        bytes=size,
        first_row=int(frame.get_column(ROW_ID)[0]),
        last_row=int(frame.get_column(ROW_ID)[-1]),
    )
