"""What the unfinished backfills of an instance target (a backfill's targets are stored as it is
launched): the shard partitions they still need kept, and whether one will yet run an asset."""

from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from resources.dagster_private import BulkActionStatus

# A backfill in these states may still launch runs of what it targets.
UNFINISHED = (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING)


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


def backfill_will_run(instance: dg.DagsterInstance, asset: dg.AssetKey) -> bool:
    """Whether an unfinished backfill targets the unpartitioned ``asset`` and has not yet
    materialized it."""
    return any(
        asset in data.target_subset.non_partitioned_asset_keys
        and asset not in data.materialized_subset.non_partitioned_asset_keys
        for data in _unfinished(instance)
    )
