"""A per-shard asset's body over the shards of its run: one, or a range run as one (CLI driver,
single-run backfills), a few at a time, with their metadata summed."""

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg

from maple_assets.graph.engine_log import engine_log_to


def per_shard(context: dg.AssetExecutionContext, work: Any, parallel: int = 1) -> dg.Output[Any]:
    """Run ``work(shard) -> (frame, metadata)`` for every partition of the run.

    A run may cover one shard (the sensor's per-shard runs) or a range of shards (the CLI driver
    and single-run backfills); a multi-shard run returns one frame per partition key.
    """
    keys = context.partition_keys
    started = time.monotonic()
    with engine_log_to(context.log):
        if parallel > 1 and len(keys) > 1:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                results = list(pool.map(work, keys))
        else:
            results = [work(key) for key in keys]
    duration = {"duration_s": round(time.monotonic() - started, 3)}
    if len(keys) == 1:
        frame, metadata = results[0]
        return dg.Output(frame, metadata={**metadata, **duration})
    metadata = {"shards": len(keys), **sum_metadata([m for _, m in results]), **duration}
    return dg.Output({k: f for k, (f, _) in zip(keys, results, strict=True)}, metadata=metadata)


def sum_metadata(items: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    return total
