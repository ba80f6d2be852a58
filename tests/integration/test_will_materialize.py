"""Whether a "Materialize all" under way will still materialize an unpartitioned asset, as the
sensors ask before requesting it themselves, on a real instance: a stored backfill, its runs
made by ``dg.materialize`` under the backfill's tag (the backfill's loop counts a run's assets
only once the run ends, which here it never does); a run of one partition created and not
started, as the UI's run is while it waits in the queue."""

import time

import dagster as dg
from dagster._core.execution.backfill import PartitionBackfill

from maple_assets.graph.will_materialize import backfill_will_run, partition_run_will_run
from resources.dagster_private import BACKFILL_ID_TAG, PARTITION_NAME_TAG


@dg.asset
def merged() -> int:
    return 1


def test_a_backfill_that_merged_is_done_though_a_sensor_merged_again_since() -> None:
    defs = dg.Definitions(assets=[merged])
    with dg.instance_for_test() as instance:
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id="materialize-all", asset_graph=defs.resolve_asset_graph(),
            partition_names=None, asset_selection=[merged.key], backfill_timestamp=time.time(),
            tags={}, dynamic_partitions_store=instance, all_partitions=True, title=None,
            description=None, run_config=None,
        )  # fmt: skip
        instance.add_backfill(backfill)
        assert backfill_will_run(instance, merged.key)
        dg.materialize([merged], instance=instance)  # a sensor's run, not the backfill's
        assert backfill_will_run(instance, merged.key)
        dg.materialize([merged], instance=instance, tags={BACKFILL_ID_TAG: "materialize-all"})
        assert not backfill_will_run(instance, merged.key)
        dg.materialize([merged], instance=instance)  # the sensor's again, after the backfill's
        assert not backfill_will_run(instance, merged.key)


def test_an_unfinished_run_of_a_shard_partition_that_selects_the_asset_will_run_it() -> None:
    job = dg.Definitions(assets=[merged]).resolve_implicit_global_asset_job_def()
    stand_in = {PARTITION_NAME_TAG: "awaiting_input_shards"}
    with dg.instance_for_test() as instance:
        assert not partition_run_will_run(instance, merged.key, ["awaiting_input_shards"])
        instance.create_run_for_job(job, tags={PARTITION_NAME_TAG: "other"})
        instance.create_run_for_job(job, tags=stand_in, asset_selection=set())
        assert not partition_run_will_run(instance, merged.key, ["awaiting_input_shards"])
        clicked = instance.create_run_for_job(job, tags=stand_in, asset_selection={merged.key})
        assert partition_run_will_run(instance, merged.key, ["awaiting_input_shards", "s00000"])
        assert not partition_run_will_run(instance, merged.key, ["s00000"])
        instance.report_run_failed(clicked)
        assert not partition_run_will_run(instance, merged.key, ["awaiting_input_shards"])
