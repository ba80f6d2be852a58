"""The merged output: every shard's input rows joined with its responses, streamed to one file,
and the ``merged.json`` record of it."""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import polars as pl

from maple_engine.collect.responses import REUSED, add_run_summary, fill_responses
from maple_engine.crashpoints import crash_point
from maple_engine.inputs.structured import schema_dtype
from maple_engine.job import Job
from maple_engine.merge.merge import OutputTable, merge_shard, write_merged
from maple_engine.plan.versions import prepare_fills, shard_fills
from maple_engine.spec import CUSTOM_ID, KEY, REQUEST
from maple_engine.steps import shard_responses


def default_output(job: Job) -> str:
    return job.state.storage.uri(job.state.paths.output(job.spec.output_format()))


def merge_job(job: Job, output: str | None = None) -> OutputTable:
    """Stream every shard's input rows joined with its responses into the output file.

    Rows the version sent take their responses from its attempts; the other rows are filled
    from the response store (``llm_reused``)."""
    manifest = job.state.manifest() or []
    path = output or job.spec.output or default_output(job)
    schema = job.spec.response_schema
    parsed = schema_dtype(schema) if schema is not None else None
    version = job.state.version()
    number = version.number if version is not None else 0
    if number:
        prepare_fills(job.state.storage, job.spec.name, number)

    totals: dict[str, Any] = {"sent": 0, "reused": 0}

    def frames() -> Iterator[pl.DataFrame]:
        for shard in manifest:
            rows = job.state.shard_frame(shard.key).drop(REQUEST, CUSTOM_ID, KEY, strict=False)
            sent = shard_responses(job.state, shard.key).with_columns(pl.lit(False).alias(REUSED))
            filled = pl.DataFrame()
            if number:
                found = shard_fills(
                    job.state.storage, job.spec.name, number, shard.first_row, shard.last_row
                )
                filled = fill_responses(found)
            add_run_summary(totals, sent, filled)
            responses = pl.concat([sent, filled], how="diagonal_relaxed") if filled.height else sent
            yield merge_shard(rows, responses, job.spec.model, parsed)
            crash_point("mid_merge")

    fmt, s3 = job.spec.output_format(), job.state.storage.s3
    table = write_merged(frames(), path, fmt, job.spec.source, s3)
    job.state.storage.write_json(
        job.state.paths.merged,
        {
            "path": table.path,
            "rows": table.rows,
            "version": number,
            "at": datetime.now(UTC).isoformat(),
            "totals": totals,
        },
    )
    return table
