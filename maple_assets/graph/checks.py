"""Asset checks: every input row once in ``merged``, every row final, no shard over the limits."""

from typing import Any

import dagster as dg
import polars as pl

from maple_assets.graph.names import asset_key
from maple_engine.spec import JobSpec
from maple_engine.state import JobState


def _state(spec: JobSpec, context: dg.AssetCheckExecutionContext) -> JobState:
    return JobState(context.resources.maple_storage.storage(), spec.name)


def build_checks(spec: JobSpec, keys: set[str]) -> list[dg.AssetChecksDefinition]:
    merged_key = asset_key(spec.name, "merged")
    shards_key = asset_key(spec.name, "input_shards")

    @dg.asset_check(
        asset=merged_key,
        name="every_row_once",
        required_resource_keys=keys,
        description="Every input row appears exactly once in merged.",
    )
    def every_row_once(
        context: dg.AssetCheckExecutionContext, merged: pl.LazyFrame
    ) -> dg.AssetCheckResult:
        manifest = _state(spec, context).manifest() or []
        expected = sum(s.rows for s in manifest)
        got = int(merged.select(pl.len()).collect().item())
        return dg.AssetCheckResult(
            passed=got == expected, metadata={"expected": expected, "rows": got}
        )

    @dg.asset_check(
        asset=merged_key,
        name="every_row_final",
        required_resource_keys=keys,
        description="Every row is succeeded, or failed with a failure class.",
    )
    def every_row_final(
        context: dg.AssetCheckExecutionContext, merged: pl.LazyFrame
    ) -> dg.AssetCheckResult:
        bad = (
            merged.filter(
                ~pl.col("llm_status").is_in(["succeeded", "failed"])
                | ((pl.col("llm_status") == "failed") & pl.col("llm_failure_class").is_null())
            )
            .select(pl.len())
            .collect()
            .item()
        )
        return dg.AssetCheckResult(passed=bad == 0, metadata={"rows_not_final": int(bad)})

    @dg.asset_check(
        asset=shards_key,
        name="shards_within_limits",
        required_resource_keys=keys,
        description="No shard exceeds the request-count or byte limit.",
    )
    def shards_within_limits(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        manifest = _state(spec, context).manifest() or []
        over: list[dict[str, Any]] = [
            {"shard": s.key, "rows": s.rows, "bytes": s.bytes}
            for s in manifest
            if s.rows > spec.max_requests_per_batch or s.bytes > spec.max_batch_bytes
        ]
        return dg.AssetCheckResult(
            passed=not over, metadata={"shards": len(manifest), "over": str(over)}
        )

    return [every_row_once, every_row_final, shards_within_limits]
