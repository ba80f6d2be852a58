"""A per-shard asset's body over the shards of its run: one, or a range run as one (CLI driver,
single-run backfills), a few at a time, with their metadata summed."""

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg

from maple_assets.graph.engine_log import engine_log_to


def per_shard(
    context: dg.AssetExecutionContext, work: Any, parallel: int = 1
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """Run ``work(shard) -> metadata`` for every partition of the run.

    A run may cover one shard (the sensor's per-shard runs) or a range of shards (the CLI driver
    and single-run backfills). The shards' data lives in the job's state, so the run stores no
    value: it reports metadata only, each partition its own shard's figures (a range run adds
    the number of shards it covered and its duration to every one).
    """
    keys = context.partition_keys
    started = time.monotonic()
    with engine_log_to(context.log):
        if parallel > 1 and len(keys) > 1:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                results: list[dict[str, Any]] = list(pool.map(work, keys))
        else:
            results = [work(key) for key in keys]
    duration = {"duration_s": round(time.monotonic() - started, 3)}
    if len(keys) == 1:
        return dg.MaterializeResult(metadata={**results[0], **duration})
    for key, metadata in zip(keys, results, strict=True):
        context.add_asset_metadata(metadata, partition_key=key)
    return dg.MaterializeResult(metadata={"shards_in_run": len(keys), **duration})
