"""The shard partitions are the current version's: after an edit, the earlier version's
partitions are gone (a file's rerun has partitions for the rows it sends only), and a shard
whose rows were all reused reads as materialized, not Missing, up to date with the
``input_shards`` run that reused it, not Unsynced, and its ``failed_rows`` check evaluated
(through the real Dagster instance, the CLI's runner and the emulator)."""

from pathlib import Path

import dagster as dg
import polars as pl
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def test_an_edit_leaves_only_the_new_versions_partitions(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    titles = [f"loaf {i}" for i in range(7)]
    pl.DataFrame({"title": titles}).write_csv(table)
    en = enrichment(
        name="current", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), max_requests_per_batch=3,
        max_enqueued_tokens=10_000_000,
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    with dg.instance_for_test() as instance:
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        first = partitions(instance, en)
        pl.DataFrame({"title": [*titles[:6], "barley loaf"]}).write_csv(table)  # last shard
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        second = partitions(instance, en)  # a shard of the one row sent
        pl.DataFrame({"title": titles[:6]}).write_csv(table)  # a row deleted: nothing to send
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        third = partitions(instance, en)  # every row in its shards, all reused
        status = {
            stage: instance.get_materialized_partitions(en.key(stage))
            for stage in ("submissions", "raw_responses")
        }
        reused = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=en.key("submissions"), asset_partitions=third),
            limit=10,
        ).records
        defs = dg.Definitions(assets=en.assets, asset_checks=en.checks, resources=resources)
        graph = defs.resolve_asset_graph()
        stale = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        statuses = {
            (stage, shard): stale.get_status(en.key(stage), shard)
            for stage in ("submissions", "raw_responses")
            for shard in third
        }
        raws = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=en.key("raw_responses"), asset_partitions=third),
            limit=10,
        ).records
        latest_raw = {r.partition_key: r.storage_id for r in reversed(raws)}
        check = dg.AssetCheckKey(en.key("raw_responses"), "failed_rows")
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=20)
        resources["maple_costs"].close()
    evaluated = [
        r.event.dagster_event.asset_check_evaluation_data
        for r in history
        if r.event is not None and r.event.dagster_event is not None
    ]
    reused_checks = {e.partition: e for e in evaluated if e.partition in third}
    assert sorted(reused_checks) == sorted(third)  # evaluated, not left "Not evaluated"
    assert all(e.passed and e.description.startswith("no row of") for e in reused_checks.values())
    targets = {
        e.partition: e.target_materialization_data.storage_id for e in reused_checks.values()
    }
    assert targets == latest_raw  # on the reused shard's own materialization: not Missing
    assert (len(first), len(second), len(third)) == (3, 1, 2)
    assert not set(first) & set(second) and not set(second) & set(third)
    for stage, materialized in status.items():
        assert set(third) <= materialized, stage  # nothing Missing, the reused shards too
    assert len(reused) == 2
    assert set(statuses.values()) == {StaleStatus.FRESH}, statuses  # not Unsynced in the UI
    assert {r.asset_materialization.metadata["requests"].value for r in reused} == {0}  # type: ignore[union-attr]
    assert pl.read_parquet(tmp_path / "out.parquet")["llm_status"].to_list() == ["succeeded"] * 6


def partitions(instance: dg.DagsterInstance, en: Enrichment) -> list[str]:
    return instance.get_dynamic_partitions(en.partitions_def.name or "")
