"""The sensor asks for each run once: a finished job stops asking for ``merged`` every tick
(which Dagster logged as "Skipping ... already completed" at INFO on every tick)."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.graph.sensor_cursor import fresh_requests
from maple_assets.wiring import maple_resources
from tests.integration.test_graph import run_graph


def tick(
    en: Enrichment, instance: dg.DagsterInstance, resources: dict[str, Any], cursor: str | None
) -> dg.SensorResult:
    defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
    with (
        dg.partition_loading_context(dynamic_partitions_store=instance),
        dg.build_sensor_context(
            instance=instance, resources=resources, definitions=defs, cursor=cursor
        ) as ctx,
    ):
        return en.sensor.evaluate_tick(ctx)


def small_job(tmp_path: Path, name: str) -> tuple[Enrichment, dict[str, Any]]:
    """A three-row enrichment on the emulator (``MAPLE_EMULATOR_URL``) and its resources."""
    table = tmp_path / "t.parquet"
    pl.DataFrame({"title": ["a", "b", "c"]}).write_parquet(table)
    en = enrichment(name=name, source=str(table), prompt="{title}", model="gpt-4o-mini",
                    provider="emulator")  # fmt: skip
    return en, maple_resources([en], storage_root=str(tmp_path / "store"))


def test_a_finished_job_asks_for_merged_once(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    en, resources = small_job(tmp_path, "once")
    with dg.instance_for_test() as instance:
        run_graph(en, [], resources, instance)
        first = tick(en, instance, resources, None)
        keys = [str(r.run_key) for r in first.run_requests or []]
        assert len(keys) == 1 and ":merged:" in keys[0]  # the job is done: only merged is asked
        second = tick(en, instance, resources, first.cursor)
        assert not second.run_requests
        third = tick(en, instance, resources, second.cursor)
        assert not third.run_requests


def test_the_cursor_forgets_keys_no_longer_asked_for() -> None:
    a, b = dg.RunRequest(run_key="j:a"), dg.RunRequest(run_key="j:b")
    fresh, cursor = fresh_requests([a, b], None)
    assert fresh == [a, b]
    fresh, cursor = fresh_requests([b], cursor)
    assert fresh == []
    fresh, cursor = fresh_requests([a], cursor)  # asked again after a tick without it
    assert fresh == [a]
