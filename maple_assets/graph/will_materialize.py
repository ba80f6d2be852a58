"""Whether a run already under way will materialize an unpartitioned asset, so that a sensor
does not ask for it a second time: an unfinished backfill that targets it ("Materialize all"
of a job with many shard partitions), or an unfinished run of one shard partition that selects
it ("Materialize all" of a job with one, such as the stand-in ``awaiting_input_shards`` of a new
job: the UI launches a run, not a backfill). Either one's ``merged`` step waits for the sensor
to bring the shards, then merges (``maple_assets.graph.assets``). A run that has materialized
the asset already, though it goes on, counts as done, as does a backfill one of whose runs has:
any of its materializations since it began, not only the latest (a sensor's run may have
materialized the asset again since)."""

from collections.abc import Callable, Sequence

import dagster as dg

from maple_assets.graph.shard_partitions import UNFINISHED, UNFINISHED_RUNS
from resources.dagster_private import BACKFILL_ID_TAG, PARTITION_NAME_TAG


def backfill_will_run(instance: dg.DagsterInstance, asset: dg.AssetKey) -> bool:
    """Whether an unfinished backfill targets ``asset`` and has not materialized it yet (its
    loop counts a run's assets only once the run ends). Queries: one per backfill state, and
    two for each unfinished backfill that targets the asset."""
    for status in UNFINISHED:
        for backfill in instance.get_backfills(status=status):
            data = backfill.asset_backfill_data
            if (
                data is not None
                and asset in data.target_subset.non_partitioned_asset_keys
                and asset not in data.materialized_subset.non_partitioned_asset_keys
                and not _materialized_since(
                    instance,
                    asset,
                    backfill.backfill_timestamp,
                    _of_backfill(instance, backfill.backfill_id),
                )
            ):
                return True
    return False


def partition_run_will_run(
    instance: dg.DagsterInstance, asset: dg.AssetKey, partitions: Sequence[str]
) -> bool:
    """Whether an unfinished run of one of ``partitions`` (the job's shard partitions) selects
    ``asset`` and has not materialized it yet. Queries: one, and one for each such run."""
    if not partitions:
        return False
    unfinished = dg.RunsFilter(
        statuses=UNFINISHED_RUNS, tags={PARTITION_NAME_TAG: list(partitions)}
    )
    for record in instance.get_run_records(filters=unfinished):
        run = record.dagster_run
        if asset in (run.asset_selection or ()) and not _materialized_since(
            instance, asset, record.create_timestamp.timestamp(), _is_run(run.run_id)
        ):
            return True
    return False


def _is_run(run_id: str) -> Callable[[set[str]], bool]:
    """Whether the run ``run_id`` is one of the runs named."""
    return lambda runs: run_id in runs


def _of_backfill(instance: dg.DagsterInstance, backfill: str) -> Callable[[set[str]], bool]:
    """Whether one of the runs named is a run of ``backfill``."""
    return lambda runs: bool(
        instance.get_runs(
            filters=dg.RunsFilter(run_ids=list(runs), tags={BACKFILL_ID_TAG: backfill}), limit=1
        )
    )


def _materialized_since(
    instance: dg.DagsterInstance,
    asset: dg.AssetKey,
    since: float,
    among: Callable[[set[str]], bool],
) -> bool:
    """Whether a materialization of ``asset`` after ``since`` is of a run ``among`` picks out
    (given the ids of the runs of a page of them)."""
    after = dg.AssetRecordsFilter(asset_key=asset, after_timestamp=since)
    cursor = None
    while True:
        found = instance.fetch_materializations(after, limit=100, cursor=cursor)
        runs = {record.run_id for record in found.records}
        if runs and among(runs):
            return True
        if not found.has_more:
            return False
        cursor = found.cursor
