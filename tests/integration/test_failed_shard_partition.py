"""A shard whose failed rows are past ``error_failed_share`` for good is a failed (red)
partition of ``raw_responses`` in the sensor's flow: its answers are stored, ``merged`` is made
all the same, and a later ``retry_failed`` attempt within the threshold turns it green."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.graph.failed_shards import FAILED_SHARDS_TAG
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider
from resources.dagster_private import RETRY_ON_ASSET_OR_OP_FAILURE_TAG
from tests.integration.test_graph import run_graph

FAILED, MATERIALIZED = dg.AssetPartitionStatus.FAILED, dg.AssetPartitionStatus.MATERIALIZED


def statuses(instance: dg.DagsterInstance, en: Enrichment) -> dict[str, Any]:
    shards = instance.get_dynamic_partitions(en.partitions_def.name or "")
    key = en.key("raw_responses")
    return dict(instance.get_status_by_partition(key, shards, en.partitions_def) or {})


@pytest.mark.slow  # ~10-15 s: two rounds of the sensor's flow on the emulator
def test_a_shard_past_the_threshold_is_red_until_a_retry_is_within_it(tmp_path: Path) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(40)]}).write_csv(table)
    en = enrichment(
        name="red_shards", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), retries={"refused": 0},
        max_requests_per_batch=10, error_failed_share=0.5,
    )  # fmt: skip
    refusing = EmulatorConfig(batch_seconds=0, fail={"refused": 0.5}, seed=7, control_fail=0.0)
    healed = EmulatorConfig(batch_seconds=0, seed=7, control_fail=0.0)
    store = str(tmp_path / "store")
    with dg.instance_for_test() as instance:
        with EmulatorServer(refusing) as server:
            resources = wire_resources(store, {"emulator": build_provider("emulator", server.url)})
            failures: list[dg.ExecuteInProcessResult] = []
            launched = run_graph(en, [], resources, instance, failed=failures)
            resources["maple_costs"].close()
        shown = statuses(instance, en)
        assert len(shown) == 4 and set(shown.values()) == {FAILED, MATERIALIZED}, shown
        red = {shard for shard, status in shown.items() if status == FAILED}
        assert failures and any(k.startswith("red_shards:merged:") for k in launched)
        assert instance.get_latest_materialization_event(en.merged_key) is not None
        run = instance.get_run_by_id(failures[0].run_id)
        assert run is not None and run.tags[RETRY_ON_ASSET_OR_OP_FAILURE_TAG] == "false"
        assert set(run.tags[FAILED_SHARDS_TAG].split(",")) == red
        [failure] = [e for e in failures[0].all_events if e.is_step_failure]
        assert "rows failed" in str(failure.step_failure_data.error)
        observed = instance.fetch_observations(en.key("raw_responses"), limit=10).records
        assert {r.partition_key for r in observed} == red  # the figures stay
        assert pl.read_parquet(tmp_path / "out.parquet").height == 40

        with EmulatorServer(healed) as server:
            resources = wire_resources(store, {"emulator": build_provider("emulator", server.url)})
            again = {"retry_failed": True}
            run_graph(en, [], resources, instance, shard_config=again)  # every run succeeds
            resources["maple_costs"].close()
        assert set(statuses(instance, en).values()) == {MATERIALIZED}
