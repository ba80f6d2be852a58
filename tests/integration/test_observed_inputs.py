"""Input files are observed: an edited file shows its enrichment stale by itself, an unchanged
file (observed again, or its catalog re-read) never makes anything stale. Through Dagster's own
observation runs, sensor ticks, data versions and stale-status resolver on a real instance; the
file's watch sensor records observations without launching a run."""

import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from emulator.server import EmulatorServer
from maple_assets import definitions
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def _status(instance: dg.DagsterInstance, assets: list[Any], key: dg.AssetKey) -> StaleStatus:
    """What the UI shows (Dagster's own resolver, as its test helpers build it)."""
    return get_stale_status_resolver(instance, assets).get_status(key)


def _observe(instance: dg.DagsterInstance, defs: dg.Definitions, key: dg.AssetKey) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection={key})
        assert job.execute_in_process(instance=instance).success
    record = instance.fetch_observations(key, limit=1).records[0]
    version = record.asset_observation.data_version  # type: ignore[union-attr]
    assert version is not None
    return version


def _version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    record = instance.fetch_materializations(key, limit=1).records[0]
    return record.asset_materialization.tags["dagster/data_version"]  # type: ignore[union-attr]


def test_an_edited_input_file_shows_its_enrichment_stale(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["rye", "spelt", "oat"]}).write_csv(table)
    en = enrichment(
        name="observed", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"),
    )  # fmt: skip
    resources = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", emulator_server.url)}
    )
    defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
    shards, observed = en.key("input_shards"), en.key("input_file")
    graph = defs.resolve_asset_graph()  # nothing launches observation runs on a schedule
    assert graph.get(observed).auto_observe_interval_minutes is None
    with dg.instance_for_test() as instance:
        first = _observe(instance, defs, observed)
        assert dg.materialize(
            en.assets, selection=[shards], instance=instance, resources=resources
        ).success
        assert _status(instance, en.assets, shards) == StaleStatus.FRESH
        table.touch()  # a new modification time, the same content
        assert _observe(instance, defs, observed) == first
        assert _status(instance, en.assets, shards) == StaleStatus.FRESH
        pl.DataFrame({"title": ["rye", "spelt", "barley"]}).write_csv(table)
        assert _observe(instance, defs, observed) != first
        assert _status(instance, en.assets, shards) == StaleStatus.STALE
        resources["maple_costs"].close()


def test_the_sample_catalog_follows_its_file() -> None:
    """Its file observed with a new version requests ``grocery_catalog`` (eager); re-reading an
    unchanged file gives the same data version, so the enrichment is not made stale by it."""
    defs = definitions.defs
    file_key, catalog_key = dg.AssetKey("grocery_catalog_file"), dg.AssetKey("grocery_catalog")
    with dg.instance_for_test() as instance:
        assert dg.materialize([definitions.grocery_catalog], instance=instance).success
        once = _version(instance, catalog_key)
        assert dg.materialize([definitions.grocery_catalog], instance=instance).success
        assert _version(instance, catalog_key) == once  # nothing changed
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        instance.report_runless_asset_event(
            dg.AssetObservation(asset_key=file_key, tags={"dagster/data_version": "edited"})
        )
        after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert after.get_num_requested(catalog_key) == 1


def _tick(
    instance: dg.DagsterInstance, defs: dg.Definitions, name: str, cursor: str | None
) -> tuple[int, str | None]:
    """One tick of the watch sensor ``name``, its events recorded as the daemon records them:
    (observations recorded, the new cursor). It never asks for a run."""
    watch = defs.resolve_sensor_def(name)
    data = watch.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=cursor))
    assert data.run_requests in (None, [])
    for event in data.asset_events:
        instance.report_runless_asset_event(event)  # type: ignore[arg-type]
    return len(data.asset_events), data.cursor or cursor


def test_the_watch_sensor_records_only_changes_and_launches_no_run(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["rye", "spelt", "oat"]}).write_csv(table)
    en = enrichment(
        name="watched", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"),
    )  # fmt: skip
    resources = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", emulator_server.url)}
    )
    defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
    shards, observed = en.key("input_shards"), en.key("input_file")
    watch = defs.resolve_sensor_def("watched_watch")
    assert watch.default_status == dg.DefaultSensorStatus.RUNNING
    with dg.instance_for_test() as instance:
        seen, cursor = _tick(instance, defs, "watched_watch", None)
        assert seen == 1  # the first look records the file's version
        assert dg.materialize(
            en.assets, selection=[shards], instance=instance, resources=resources
        ).success
        assert _status(instance, en.assets, shards) == StaleStatus.FRESH
        assert _tick(instance, defs, "watched_watch", cursor)[0] == 0  # untouched: no event
        table.touch()  # a new modification time, the same content
        seen, cursor = _tick(instance, defs, "watched_watch", cursor)
        assert seen == 0 and _status(instance, en.assets, shards) == StaleStatus.FRESH
        pl.DataFrame({"title": ["rye", "spelt", "barley"]}).write_csv(table)
        seen, cursor = _tick(instance, defs, "watched_watch", cursor)
        assert seen == 1
        assert _status(instance, en.assets, shards) == StaleStatus.STALE
        assert instance.get_runs_count() == 1  # the materialization; no observation runs
        observed_version = instance.fetch_observations(observed, limit=1).records[0]
        assert observed_version.asset_observation.data_version is not None  # type: ignore[union-attr]
        resources["maple_costs"].close()
