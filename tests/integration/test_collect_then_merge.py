"""The daemon's last collect run materializes ``merged`` after the shards (one run instead of two):
``merged`` is written when every shard is final, and skips itself, the run still a success, when
the collect planned retries (the sensor asks for it once they are final)."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)


@pytest.mark.parametrize(("fail", "merges"), [(0.0, True), (1.0, False)])
def test_a_collect_run_that_also_selects_merged(
    tmp_path: Path, monkeypatch: Any, fail: float, merges: bool
) -> None:
    table = tmp_path / "t.parquet"
    pl.DataFrame({"title": ["a", "b", "c"]}).write_parquet(table)
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": fail}, control_fail=0.0)
    with EmulatorServer(config) as emulator, dg.instance_for_test() as instance:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator.url)
        en = enrichment(name="both", source=str(table), prompt="{title}", model="gpt-4o-mini",
                        provider="emulator", max_requests_per_batch=1)  # fmt: skip
        resources = maple_resources([en], storage_root=str(tmp_path / "store"))
        assets = [*en.assets, *en.checks]

        def run(selection: list[dg.AssetKey], tags: dict[str, str]) -> dg.ExecuteInProcessResult:
            return dg.materialize(
                assets, selection=selection, instance=instance, resources=resources, tags=tags
            )

        assert run([en.key("input_shards")], {}).success
        shards = {RANGE_START: "s00000", RANGE_END: "s00002"}
        assert run([en.key("submissions")], shards).success
        both = run([en.key("raw_responses"), en.merged_key], shards)
        assert both.success
        collected = instance.get_materialized_partitions(en.key("raw_responses"))
        assert collected == {"s00000", "s00001", "s00002"}
        merged = instance.get_latest_materialization_event(en.merged_key)
        assert (merged is not None) is merges
        evaluations = [e for e in both.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        on_merged = {e.asset_check_evaluation_data.asset_key for e in evaluations} - {
            en.key("raw_responses")
        }
        assert on_merged == ({en.merged_key} if merges else set())  # its checks ran only then
