"""A new version whose shards are answered wholly from the response store shows what their
stored answers say: a shard whose reused answers failed past ``error_failed_share`` is not green
(observed, not materialized; its ``failed_rows`` check counts its rows' stored failures), a run
of that partition fails it red, and once a ``retry_failed`` attempt answers every row the
shards are green."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider
from tests.integration.test_failed_shard_partition import FAILED, MATERIALIZED, statuses
from tests.integration.test_graph import run_graph

REFUSING = EmulatorConfig(batch_seconds=0, fail={"refused": 0.5}, seed=7, control_fail=0.0)
HEALED = EmulatorConfig(batch_seconds=0, seed=7, control_fail=0.0)


def declared(tmp_path: Path, columns: int) -> Enrichment:
    """The job over 40 rows of ``title`` and ``columns`` more columns the prompt does not read
    (a new column is a new version whose requests are the earlier ones)."""
    table = tmp_path / "items.csv"
    more = {f"c{n}": list(range(40)) for n in range(columns)}
    pl.DataFrame({"title": [f"item {i}" for i in range(40)], **more}).write_csv(table)
    return enrichment(
        name="reused", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), retries={"refused": 0},
        max_requests_per_batch=10, error_failed_share=0.5,
    )  # fmt: skip


def shard_checks(instance: dg.DagsterInstance, en: Enrichment) -> dict[str, str]:
    """The newest ``failed_rows`` description of each shard of the current version."""
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(en.key("raw_responses"), "failed_rows"), limit=20
    )
    said: dict[str, str] = {}
    for record in history:  # newest first
        event = record.event.dagster_event if record.event else None
        if event is not None and record.partition not in said:
            said[record.partition or ""] = event.event_specific_data.description or ""
    return said


def round_of(en: Enrichment, tmp_path: Path, instance: dg.DagsterInstance, **how: object) -> None:
    config = how.pop("config")
    assert isinstance(config, EmulatorConfig)
    with EmulatorServer(config) as server:
        store = str(tmp_path / "store")
        resources = wire_resources(store, {"emulator": build_provider("emulator", server.url)})
        run_graph(en, [], resources, instance, **how)  # type: ignore[arg-type]
        resources["maple_costs"].close()


@pytest.mark.slow  # three rounds of the sensor's flow on the emulator: ~20 s
def test_reused_failed_answers_are_not_green_and_answered_ones_are(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        first = declared(tmp_path, 0)
        round_of(first, tmp_path, instance, config=REFUSING, failed=[])
        red = {s for s, status in statuses(instance, first).items() if status == FAILED}
        assert red and len(red) < 4

        again = declared(tmp_path, 1)  # a new version, every request answered before
        round_of(again, tmp_path, instance, config=REFUSING, failed=[])
        shown = statuses(instance, again)
        assert all(s.startswith("v2-") for s in shown)
        not_green = {s for s, status in shown.items() if status != MATERIALIZED}
        assert {s.removeprefix("v2-") for s in not_green} == red
        said = shard_checks(instance, again)
        for shard in shown:
            assert "reused from the response store" in said[shard], said
        assert all("rows failed" in said[s] for s in not_green), said

        shard = sorted(not_green)[0]
        store = str(tmp_path / "store")
        resources = wire_resources(store, {"emulator": build_provider("emulator", "http://x")})
        clicked = dg.materialize(
            again.assets,
            selection=[again.key("raw_responses")],
            partition_key=shard,
            instance=instance,
            resources=resources,
            raise_on_error=False,
        )
        resources["maple_costs"].close()
        assert not clicked.success and statuses(instance, again)[shard] == FAILED

        round_of(again, tmp_path, instance, config=HEALED, shard_config={"retry_failed": True})
        shown = statuses(instance, again)  # the failed rows sent again, answered
        assert set(shown.values()) == {MATERIALIZED}
        said = shard_checks(instance, again)
        assert all(said[s].startswith("no row of") for s in shown), said
