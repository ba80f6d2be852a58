"""The driver's runs (``maple enrich``, the Python API): the collect run of a job's last batches
also materializes ``merged`` (one run and one tick less); when that collection plans retries,
``merged`` skips itself in the run and comes in a run of its own once the retries are final."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def _job(tmp_path: Path, rows: int) -> Enrichment:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"bread {i}" for i in range(rows)]}).write_csv(table)
    return enrichment(
        name="runs", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), max_requests_per_batch=4,
    )  # fmt: skip


def _drive(en: Enrichment, url: str, tmp_path: Path) -> tuple[Runner, list[set[str]], int]:
    """Run the job to its end: the runner, each run's assets, oldest first, and how many
    times merged was materialized."""
    resources = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", url)}
    )
    with dg.instance_for_test() as instance:
        runner = Runner(en, resources, instance, poll_interval_s=0.05, quiet=True)
        runner.run()
        resources["maple_costs"].close()
        runs = [_steps(instance, r.run_id) for r in reversed(instance.get_runs())]
        merges = len(instance.fetch_materializations(en.merged_key, limit=100).records)
        return runner, runs, merges


def _steps(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    """The assets whose steps a run started (not their checks)."""
    started = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
    return {str(e.step_key).split("__")[-1] for e in started} & STAGES


STAGES = {"input_shards", "submissions", "raw_responses", "merged"}


def test_the_last_collect_run_merges_too(emulator_server: EmulatorServer, tmp_path: Path) -> None:
    runner, runs, merges = _drive(_job(tmp_path, 12), emulator_server.url, tmp_path)
    assert {"merged"} not in runs  # no run of merged alone
    assert runs[-1] == {"raw_responses", "merged"}, runs
    assert merges == 1
    assert runner.runs == len(runs)
    assert runner.stage_runs["raw_responses"] == sum("raw_responses" in r for r in runs)
    # the shared run's time is split between its two stages, each measured
    assert runner.timings["raw_responses"] > 0 and runner.timings["merged"] > 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["title"].to_list() == [f"bread {i}" for i in range(12)]
    assert out["llm_status"].to_list() == ["succeeded"] * 12


@pytest.mark.slow
def test_retries_planned_by_the_last_collection_are_merged_in_a_later_run(
    tmp_path: Path,
) -> None:
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": 0.3}, seed=11)
    with EmulatorServer(config) as server:
        _, runs, merges = _drive(_job(tmp_path, 40), server.url, tmp_path)
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["title"].to_list() == [f"bread {i}" for i in range(40)]
    assert (out["llm_attempts"] > 1).any()  # some rows were retried
    final = (out["llm_status"] == "succeeded") | out["llm_failure_class"].is_not_null()
    assert final.all()
    # merged was written once, when every retry was final, though more runs than one asked
    # for it: a collect run of the last batches whose rows had retries to come skipped it
    assert merges == 1
    assert sum("merged" in r for r in runs) >= 2, runs
