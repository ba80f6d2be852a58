"""Before the first cut a job has one stand-in shard partition, so the UI's "Materialize all"
has a partition to launch: the sensor registers it, a run of it (one partition: a run, not a
backfill) cuts the first version in its input_shards step and keeps the stand-in while it runs
(its shard steps send nothing), and the sensor then drops it for the version's shards."""

from pathlib import Path

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.graph.shard_partitions import BEFORE_FIRST_CUT
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def tick(en: Enrichment, instance: dg.DagsterInstance, resources: dict[str, object]) -> None:
    """One tick of the job's sensor, its partition requests applied as the daemon applies them."""
    defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
    with (
        dg.partition_loading_context(dynamic_partitions_store=instance),
        dg.build_sensor_context(instance=instance, resources=resources, definitions=defs) as ctx,
    ):
        result = en.sensor.evaluate_tick(ctx)
    for request in result.dynamic_partitions_requests or []:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_the_stand_in_partition_carries_the_first_run(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"loaf {i}" for i in range(5)]}).write_csv(table)
    en = enrichment(
        name="first", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", max_requests_per_batch=2,
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    name = en.partitions_def.name or ""
    with dg.instance_for_test() as instance:
        tick(en, instance, resources)
        assert instance.get_dynamic_partitions(name) == [BEFORE_FIRST_CUT]
        stages = [en.key(s) for s in ("input_shards", "submissions", "raw_responses")]
        clicked = dg.materialize(
            en.assets, selection=stages, partition_key=BEFORE_FIRST_CUT, instance=instance,
            resources=resources,
        )  # fmt: skip
        assert clicked.success
        sent = clicked.asset_materializations_for_node(en.key("submissions").to_python_identifier())
        assert [m.metadata["requests"].value for m in sent] == [0]  # the stand-in sends nothing
        tick(en, instance, resources)
        assert instance.get_dynamic_partitions(name) == ["s00000", "s00001", "s00002"]
        resources["maple_costs"].close()  # type: ignore[attr-defined]
