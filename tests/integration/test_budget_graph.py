"""``enrichment(budget_usd=...)`` through the asset graph in-process, and cost in the Dagster
metadata of each shard and of the job."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import maple_resources


def run(en: Enrichment, root: Path, instance: dg.DagsterInstance) -> dict[str, Any]:
    resources = maple_resources([en], storage_root=str(root))
    try:
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
    finally:
        resources["maple_costs"].close()
    return resources


def metadata_by_run(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[Any, Any]:
    """Materialization metadata per run and partition (a run may cover one shard or a range
    of shards: each shard's materialization carries its own figures)."""
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=100)
    found: dict[Any, Any] = {}
    for record in records.records:
        event = record.asset_materialization
        assert event is not None
        found[record.run_id, event.partition] = {k: v.value for k, v in event.metadata.items()}
    return found


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"product {i}" for i in range(12)]}).write_parquet(path)
    return path


def job(table: Path, tmp_path: Path, budget: float | None) -> Enrichment:
    return enrichment(
        name="budgeted",
        source=str(table),
        prompt="Name {title}",
        model="gpt-4o-mini",
        provider="emulator",
        max_requests_per_batch=6,
        output=str(tmp_path / "out.parquet"),
        budget_usd=budget,
    )


def test_cost_metadata_per_shard_and_per_job(
    emulator_server: EmulatorServer, table: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    monkeypatch.delenv("MAPLE_COST_DB", raising=False)
    en = job(table, tmp_path, budget=1.0)
    with dg.instance_for_test() as instance:
        run(en, tmp_path / "store", instance)
        shards = metadata_by_run(instance, en.key("raw_responses")).values()
        (merged,) = metadata_by_run(instance, en.merged_key).values()
    assert all(m["cost_usd"] > 0 for m in shards)
    assert merged["ledger_cost_usd"] == pytest.approx(sum(m["cost_usd"] for m in shards), abs=1e-6)
    assert merged["ledger_cost_usd"] == pytest.approx(merged["cost_usd"], abs=1e-6)
    assert merged["savings_usd"] == pytest.approx(merged["realtime_cost_usd"] / 2, abs=1e-6)
    assert merged["budget_usd"] == 1.0 and merged["stopped"] == ""


def test_factory_budget_stops_and_a_larger_one_resumes(
    emulator_server: EmulatorServer, table: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    monkeypatch.delenv("MAPLE_COST_DB", raising=False)
    with dg.instance_for_test() as instance:
        run(job(table, tmp_path, budget=0.0), tmp_path / "store", instance)
        stopped = pl.read_parquet(tmp_path / "out.parquet")
        assert emulator_server.stats()["batches_created"] == 0
        assert set(stopped["llm_failure_class"]) == {"not_sent"}
        assert stopped["llm_error"][0].startswith("budget reached before shard s00000")
        run(job(table, tmp_path, budget=1.0), tmp_path / "store", instance)
    done = pl.read_parquet(tmp_path / "out.parquet")
    assert (done["llm_status"] == "succeeded").all()
    assert emulator_server.stats()["batches_created"] == 2
