"""The merged output: every shard's input rows joined with its responses, streamed to one file,
and the ``merged.json`` record of it.

An embedding shard is merged ``EMBEDDING_SLICE_ROWS`` rows at a time: each slice's vectors are
decoded and written as one Parquet row group, so memory holds a slice of vectors, not a shard's.
"""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import polars as pl

from maple_engine.collect.responses import (
    EMPTY_TEXT,
    EMPTY_TEXT_ERROR,
    add_run_summary,
    fill_responses,
    unsent_responses,
)
from maple_engine.collect.shard_responses import shard_responses
from maple_engine.crashpoints import crash_point
from maple_engine.inputs.structured import schema_dtype
from maple_engine.job import Job
from maple_engine.merge.input_rows import Piece, input_pieces
from maple_engine.merge.merge import OutputTable, merge_shard, vector_length, write_merged
from maple_engine.model import CUSTOM_ID, KEY, REQUEST, REUSED, ROW_ID, ShardInfo
from maple_engine.plan.changed_rows import SPARSE
from maple_engine.plan.copied_answers import PreviousAnswers, recorded_identity
from maple_engine.plan.versions import prepare_fills, shard_fills
from maple_engine.work import generation

#: Rows of an embedding shard decoded and written at once (one Parquet row group): 10 MB of
#: float32 at 256 dimensions.
EMBEDDING_SLICE_ROWS = 10_000


def default_output(job: Job) -> str:
    return job.state.output_uri(job.spec.output_format())


def merge_job(job: Job, output: str | None = None) -> OutputTable:
    """Stream every shard's input rows joined with its responses into the output file.

    Rows the version sent take their responses from its attempts; the other rows are filled
    from the response store (``llm_reused``). When the version's shards hold only the rows it
    sent, the input rows come from the input file itself, block by block."""
    manifest = job.state.manifest() or []
    path = output or job.spec.output or default_output(job)
    schema = job.spec.response_schema
    parsed = schema_dtype(schema) if schema is not None else None
    version = job.state.version()
    number = version.number if version is not None else 0
    record = job.state.manifest_record() or {}
    sparse = record.get("layout") == SPARSE and version is not None
    previous = PreviousAnswers.open(job, number) if sparse else None
    if number:
        skip = previous.mask if previous is not None else None
        prepare_fills(job.state.storage, job.spec.name, number, skip)

    totals: dict[str, Any] = {"sent": 0, "reused": 0}

    def responses_of(shard: ShardInfo) -> tuple[pl.DataFrame, pl.DataFrame]:
        sent = shard_responses(job.state, shard.key).with_columns(pl.lit(False).alias(REUSED))
        filled = pl.DataFrame()
        if number:
            found = shard_fills(
                job.state.storage, job.spec.name, number, shard.first_row, shard.last_row
            )
            filled = fill_responses(found)
        return sent, filled

    vector = None
    if job.spec.kind.answer == "vector":
        vector = job.spec.dimensions or _first_vector_length(manifest, responses_of)

    def shard_pieces() -> Iterator[Piece]:
        for shard in manifest:  # (no local here: it would hold a shard while the next is read)
            yield _input_rows(job, shard), *responses_of(shard)

    pieces = shard_pieces()
    if sparse and version is not None:  # shards hold only sent rows
        pieces = input_pieces(job, version, str(record["source"]), manifest, previous)

    def frames() -> Iterator[pl.DataFrame]:
        for rows, sent, stored in pieces:
            filled = stored if vector is None else _with_empty_texts(rows, sent, stored)
            add_run_summary(totals, sent, filled)
            responses = pl.concat([sent, filled], how="diagonal_relaxed") if filled.height else sent
            del sent, filled
            size = EMBEDDING_SLICE_ROWS if vector is not None else None
            for part, answers in shard_slices(rows, responses, size):
                yield merge_shard(part, answers, job.spec.model, parsed, vector)
                del part, answers
            del rows, responses  # gone before the next shard is read: one shard's answers held
            crash_point("mid_merge")

    fmt, s3 = job.spec.output_format(), job.state.storage.s3
    try:
        table = write_merged(frames(), path, fmt, job.spec.source, s3)
    finally:
        if previous is not None:
            previous.close()
    job.state.write_merged_record(
        {
            "path": table.path,
            "rows": table.rows,
            "version": number,
            "at": datetime.now(UTC).isoformat(),
            "totals": totals,
            "identity": recorded_identity(table.path, s3),  # what a next version may copy
            "generation": generation(job),  # the shards' results merged
        },
    )
    return table


def _input_rows(job: Job, shard: ShardInfo) -> pl.DataFrame:
    """A shard's input rows, without the request columns the merge leaves out."""
    return job.state.shard_frame(shard.key).drop(REQUEST, CUSTOM_ID, KEY, strict=False)


def shard_slices(
    rows: pl.DataFrame, responses: pl.DataFrame, size: int | None
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """A shard's rows ``size`` at a time (all at once when None), each with its responses."""
    if size is None or rows.height <= size:
        yield rows, responses
        return
    for start in range(0, rows.height, size):
        part = rows.slice(start, size)
        ids = part.get_column(ROW_ID)
        yield part, responses.filter(pl.col(ROW_ID).is_between(ids.min(), ids.max()))


def _first_vector_length(
    manifest: list[ShardInfo],
    responses_of: Callable[[ShardInfo], tuple[pl.DataFrame, pl.DataFrame]],
) -> int:
    """The length of the job's vectors, from its first shard with one (1 when no row has one:
    every ``llm_embedding`` is then null)."""
    for shard in manifest:
        for responses in responses_of(shard):
            if responses.height and (length := vector_length(responses)) is not None:
                return length
    return 1


def _with_empty_texts(rows: pl.DataFrame, sent: pl.DataFrame, filled: pl.DataFrame) -> pl.DataFrame:
    """``filled`` plus the rows the version neither sent nor filled: their text was empty
    (``maple_engine.plan.rerun``), so they were never sent: failed, ``empty_text``, unbilled."""
    custom_id = pl.concat_str([pl.lit("r"), pl.col(ROW_ID).cast(pl.String)])
    empty = rows.select(ROW_ID, custom_id.alias(CUSTOM_ID))
    for answered in (sent, filled):
        if answered.height:
            empty = empty.join(answered.select(ROW_ID), on=ROW_ID, how="anti")
    if empty.is_empty():
        return filled
    skipped = unsent_responses(empty, EMPTY_TEXT_ERROR, EMPTY_TEXT).with_columns(
        pl.lit(False).alias(REUSED)
    )
    return pl.concat([filled, skipped], how="diagonal_relaxed") if filled.height else skipped
