"""Shards whose failed rows are past the job's ``error_failed_share`` for good show as failed
partitions of ``raw_responses``.

Dagster 1.13 colours a partition by its materializations alone: materialized (green) once one
is recorded, failed (red) when a run planned it, recorded none and failed; a failing asset
check, even a blocking ERROR one, leaves the partition green. So the collect step records its
answers in the response store as always, then records no materialization for such a shard (an
observation carries its figures instead), materializes the run's other shards one by one, and
fails naming the shards: the partition is red until an attempt within the threshold (a run of
``input_shards`` with ``retry_failed``) materializes it. A shard with rows still to be retried
is not failed for good. ``maple enrich``'s own runs (tagged ``maple/driver``) record every
shard as before; its summary names the failed rows.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from resources.dagster_private import RETRY_ON_ASSET_OR_OP_FAILURE_TAG

DRIVER_TAG = "maple/driver"
#: On a run that failed this way: the shards past the threshold.
FAILED_SHARDS_TAG = "maple/failed_shards"


def failed_for_good(
    checked: dict[str, dg.AssetCheckEvaluation], figures: dict[str, dict[str, Any]]
) -> list[str]:
    """The shards whose ``failed_rows`` evaluation failed at ERROR severity with no row left
    to retry."""
    return [
        shard
        for shard, evaluation in checked.items()
        if not evaluation.passed
        and evaluation.severity == dg.AssetCheckSeverity.ERROR
        and not figures[shard]["pending_retry"]
    ]


def failed_shards(
    context: dg.AssetExecutionContext,
    key: dg.AssetKey,
    figures: dict[str, dict[str, Any]],
    failed: list[str],
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation]:
    """Each shard of the run materialized with its figures, except the ``failed`` ones:
    observed with them (the partition's Events list shows them)."""
    for shard in context.partition_keys:
        if shard not in figures:
            continue
        event = dg.AssetObservation if shard in failed else dg.AssetMaterialization
        yield event(asset_key=key, partition=shard, metadata=figures[shard])


def failed_shards_failure(
    context: dg.AssetExecutionContext,
    failed: list[str],
    checked: dict[str, dg.AssetCheckEvaluation],
) -> dg.Failure:
    """The step's failure naming each shard and its failed rows; Dagster's run retries (which
    would collect the same answers again) are turned off for this run."""
    context.instance.add_run_tags(
        context.run.run_id,
        {RETRY_ON_ASSET_OR_OP_FAILURE_TAG: "false", FAILED_SHARDS_TAG: ",".join(failed)},
    )
    lines = [f"shard {s}: {checked[s].description}" for s in failed]
    return dg.Failure(
        "\n".join(lines) + "\nIts answers are stored; run input_shards with retry_failed to "
        "send the failed rows again (the partition turns green when an attempt is within "
        "error_failed_share).",
        allow_retries=False,
    )
