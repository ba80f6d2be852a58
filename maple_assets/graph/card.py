"""What the Dagster UI shows of a job's assets beyond their data: kinds (the provider and the
storage format), owners (the team the cost is booked to, as ``team:NAME``), the code that
declared the job, and on ``merged`` its column schema (the input's columns, then the ``llm_*``
columns with their meaning) and row count."""

import sys
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from maple_engine.inputs.templates import parse_template, template_columns
from maple_engine.model import OUTPUT_COLUMNS
from maple_engine.spec import JobSpec
from maple_engine.storage.storage import is_remote

# What each column the output adds holds (README "Output").
COLUMN_MEANINGS = {
    "llm_response": "The model's reply text.",
    "llm_parsed": "The reply parsed against the response schema (only with one).",
    "llm_status": "succeeded or failed: the row's final outcome.",
    "llm_failure_class": "Why a failed row failed (e.g. server_error, invalid_request).",
    "llm_error": "The provider's error message of a failed row.",
    "llm_attempts": "How many times the row was sent.",
    "llm_input_tokens": "Input tokens billed for the row.",
    "llm_output_tokens": "Output tokens billed for the row.",
    "llm_reasoning_tokens": "Of the output tokens, those the model spent reasoning (null where "
    "the provider does not report them).",
    "llm_tokens_estimated": "The reply reported no token usage: its token counts (and cost) were "
    "estimated from the row's text, about 4 characters a token.",
    "llm_cached_tokens": "Of the input tokens, those read from the provider's prompt cache.",
    "llm_cache_write_tokens": "Of the input tokens, those written to the provider's prompt cache.",
    "llm_cost_usd": "What the row cost, USD (for a reused answer, what it cost when paid).",
    "llm_model": "The model that answered.",
    "llm_batch_id": "The provider batch (or real-time request group) that answered the row.",
    "llm_reused": "The answer came from the response store, not from a request of this run.",
    "llm_embedding": "The row's vector (float32 list).",
}
assert set(COLUMN_MEANINGS) == set(OUTPUT_COLUMNS)  # a new output column says what it holds


def card(spec: JobSpec, stored_as: str = "parquet") -> dict[str, Any]:
    """The keyword arguments of ``dg.asset`` that every asset of the job shares: its kinds
    (the provider, polars, and the format it is stored in) and its owner (the team)."""
    return {
        "kinds": {spec.provider, "polars", stored_as},
        "owners": [f"team:{spec.team}"],
    }


def declared_at(depth: int) -> dict[str, Any]:
    """The code reference of the line ``depth`` frames up that declared the job, unless that
    is Maple's own component (Dagster references the ``defs.yaml`` of a component's assets)."""
    frame = sys._getframe(depth + 1)
    if frame.f_globals.get("__name__") == "maple_assets.components":
        return {}
    with warnings.catch_warnings():  # code references are beta in dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        reference = dg.LocalFileCodeReference(
            file_path=frame.f_code.co_filename, line_number=frame.f_lineno
        )
        references = dg.CodeReferencesMetadataValue(code_references=[reference])
    return {"dagster/code_references": references}


def table_metadata(schema: pl.Schema, rows: int, path: str) -> dict[str, Any]:
    """``dagster/column_schema``, ``dagster/row_count`` and ``dagster/uri`` of the merged table
    at ``path`` (a local path as a ``file://`` URI)."""
    columns = [
        dg.TableColumn(name=name, type=str(dtype), description=COLUMN_MEANINGS.get(name))
        for name, dtype in schema.items()
    ]
    return {
        "dagster/column_schema": dg.MetadataValue.table_schema(dg.TableSchema(columns=columns)),
        "dagster/row_count": dg.MetadataValue.int(rows),
        "dagster/uri": dg.MetadataValue.text(
            path if is_remote(path) else Path(path).resolve().as_uri()
        ),
    }


def column_lineage(spec: JobSpec, schema: pl.Schema, upstream: dg.AssetKey) -> dict[str, Any]:
    """``dagster/column_lineage`` of merged: each input column passes through from
    ``upstream``; the answer columns (``llm_response``, ``llm_parsed``, ``llm_embedding``) come
    from the template's columns (and the image column); the other ``llm_*`` columns from none."""
    used = template_columns(parse_template(spec.template))
    if spec.kind.template_field == "prompt" and spec.image_column:
        used = [*used, spec.image_column]
    fed = [dg.TableColumnDep(asset_key=upstream, column_name=column) for column in used]
    deps = {
        name: [dg.TableColumnDep(asset_key=upstream, column_name=name)]
        for name in schema
        if name not in COLUMN_MEANINGS
    }
    deps |= {name: fed for name in ANSWERS if name in schema}
    lineage = dg.TableColumnLineage(deps_by_column=deps)
    return {"dagster/column_lineage": dg.MetadataValue.column_lineage(lineage)}


# The output columns that hold the answer, made from the template's columns.
ANSWERS = ("llm_response", "llm_parsed", "llm_embedding")
