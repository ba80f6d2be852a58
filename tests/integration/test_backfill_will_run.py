"""Whether an unfinished backfill will still materialize an unpartitioned asset, as the sensors
ask before requesting it themselves: on a real instance holding a stored backfill, its runs
made by ``dg.materialize`` under the backfill's tag (the backfill's loop counts a run's assets
only once the run ends, which here it never does)."""

import time

import dagster as dg
from dagster._core.execution.backfill import PartitionBackfill

from maple_assets.graph.shard_partitions import backfill_will_run
from resources.dagster_private import BACKFILL_ID_TAG


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
