"""The enrichment sensor's tick warns, as ``maple status`` does, when a batch in flight may
lose its results within the hour: Mistral keeps them 24 hours, and a batch submitted 23.5 hours
ago (its record aged by hand) is named on the tick, with the fix."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources


@pytest.mark.slow
def test_the_sensor_tick_warns_of_results_that_may_expire(
    tmp_path: Path, monkeypatch: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(4)]}).write_parquet(source)
    with EmulatorServer(EmulatorConfig(batch_seconds=600, control_fail=0)) as server:
        monkeypatch.setenv("MISTRAL_BASE_URL", server.url)
        monkeypatch.setenv("MISTRAL_API_KEY", "mistral-key")
        en = enrichment(
            name="aging",
            source=str(source),
            prompt="About {title}",
            model="mistral-small-latest",
            provider="mistral",
        )
        store = tmp_path / "store"
        resources = maple_resources([en], storage_root=str(store))
        defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
        with dg.instance_for_test() as instance:
            for key, partition in (("input_shards", None), ("submissions", "s00000")):
                assert dg.materialize(
                    en.assets,
                    selection=[en.key(key)],
                    partition_key=partition,
                    instance=instance,
                    resources=resources,
                ).success
            [record] = store.glob("aging/state/*/submission-1.json")
            held = json.loads(record.read_text())
            held["submitted_at"] = (datetime.now(UTC) - timedelta(hours=23.5)).isoformat()
            record.write_text(json.dumps(held))
            capfd.readouterr()  # the runs' logs
            with (
                dg.partition_loading_context(dynamic_partitions_store=instance),
                dg.build_sensor_context(
                    instance=instance, resources=resources, definitions=defs
                ) as ctx,
            ):
                en.sensor.evaluate_tick(ctx)
    said = capfd.readouterr().err  # the tick's log (Dagster's handler writes to stderr)
    warned = [line for line in said.splitlines() if "may expire within" in line]
    assert len(warned) == 1, said
    assert f"batch {held['batch_id']}" in warned[0] and "run the job's command again" in warned[0]
    assert "mistral keeps them 24.0h" in warned[0]
