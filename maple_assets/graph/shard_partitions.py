"""Which shard partitions an enrichment has: the current version's shards, and also, while an
unfinished backfill targets them, an earlier version's. Partition keys are the engine's shard
keys (``maple_engine.plan.shards.shard_key``): a new version of the job cuts new keys
(``v2-s00000``). Dagster fails a backfill whose targeted partitions were deleted, and "Materialize
all" on an enrichment is such a backfill, stored with the partitions of the moment it was
launched, before its own ``input_shards`` run cuts the new version. Those superseded partitions
go as soon as no unfinished backfill targets them (the enrichment's sensor looks at every tick).

Before the first cut there is no shard, and the UI's "Materialize all" then offers 0 partitions
and cannot launch. So the sensor registers one stand-in partition, ``awaiting_input_shards``,
while the job has no version: a "Materialize all" targets it, its ``input_shards`` run cuts the
first version, the stand-in's own runs send nothing (it is not a shard of the current version)
and it goes as the earlier versions' keys go.
"""

from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
    BulkActionStatus,
)

# A backfill in these states may still launch runs of what it targets.
UNFINISHED = (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING)
# A run in these states may still run the partitions it names.
UNFINISHED_RUNS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
#: The one partition a job has before its first version is cut.
BEFORE_FIRST_CUT = "awaiting_input_shards"


def current_partitions(
    instance: dg.DagsterInstance,
    name: str,
    keys: Sequence[str],
    assets: Sequence[dg.AssetKey],
) -> None:
    """Make the partitions ``name`` the shards ``keys`` of the current version: new ones added,
    an earlier version's removed unless an unfinished backfill of ``assets`` or an unfinished
    run (a "Materialize all" of one partition is a run, not a backfill) targets them (their
    answers live on in the response store, and a version cut again re-adds its keys)."""
    existing = instance.get_dynamic_partitions(name)
    wanted = set(keys)
    new = [k for k in keys if k not in set(existing)]
    if new:
        instance.add_dynamic_partitions(name, new)
    superseded = [k for k in existing if k not in wanted]
    if not superseded:
        return
    held = backfill_targets(instance, assets) | run_targets(instance)
    for old in superseded:
        if old not in held:
            instance.delete_dynamic_partition(name, old)


def _unfinished(instance: dg.DagsterInstance) -> Iterator[Any]:
    """The asset backfill data of each unfinished backfill."""
    for status in UNFINISHED:
        for backfill in instance.get_backfills(status=status):
            if backfill.asset_backfill_data is not None:
                yield backfill.asset_backfill_data


def backfill_targets(instance: dg.DagsterInstance, assets: Sequence[dg.AssetKey]) -> set[str]:
    """The partitions of ``assets`` that unfinished backfills target."""
    targets: set[str] = set()
    for data in _unfinished(instance):
        subsets = data.target_subset.partitions_subsets_by_asset_key
        for key in assets:
            if key in subsets:
                targets.update(subsets[key].get_partition_keys())
    return targets


def run_targets(instance: dg.DagsterInstance) -> set[str]:
    """The partitions unfinished runs name: their partition, or their range's two ends."""
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED_RUNS))
    tags = (PARTITION_NAME_TAG, ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG)
    return {run.tags[tag] for run in runs for tag in tags if tag in run.tags}
