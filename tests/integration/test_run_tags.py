"""Every run says what it is: ``maple/job``, ``maple/team``, ``maple/version``,
``maple/provider`` and ``maple/model`` on the runs the sensor asks for and ``maple enrich``
launches, so the run list filters by enrichment."""

from pathlib import Path

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.graph.sensors import run_requests
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider

EXPECTED = {
    "maple/job": "tagged",
    "maple/team": "bakery",
    "maple/version": "1",
    "maple/provider": "emulator",
    "maple/model": "gpt-4o-mini",
}


def test_sensor_and_cli_runs_carry_the_job_tags(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"bread {i}" for i in range(6)]}).write_csv(table)
    en = enrichment(
        name="tagged", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", team="bakery", output=str(tmp_path / "out.parquet"),
        max_requests_per_batch=2,
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    with dg.instance_for_test() as instance:
        runner = Runner(en, resources, instance, poll_interval_s=0.05, quiet=True)
        runner.materialize(en.key("input_shards"))
        requests = run_requests(
            runner.job(), *(en.key(a) for a in ("submissions", "raw_responses", "merged"))
        )
        assert requests and all(r.tags.items() >= EXPECTED.items() for r in requests)
        runner.run()
        runs = instance.get_runs()
        resources["maple_costs"].close()
    assert len(runs) >= 4  # input_shards (here, the driver's), submissions, raw_responses + merged
    first, later = runs[-1], runs[:-1]  # newest first: the input_shards run made version 1
    assert first.tags.items() >= {k: v for k, v in EXPECTED.items() if k != "maple/version"}.items()
    for run in later:
        missing = {k: v for k, v in EXPECTED.items() if run.tags.get(k) != v}
        assert not missing, run.tags


def test_a_run_launched_without_the_tags_gets_them_from_its_first_step(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    """A click on Materialize (or a UI backfill) launches a run with none of Maple's tags: the
    step gives it the job's, so the ``maple/job`` filter shows it beside the sensor's runs."""
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"bread {i}" for i in range(6)]}).write_csv(table)
    en = enrichment(
        name="tagged", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", team="bakery", output=str(tmp_path / "out.parquet"),
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    with dg.instance_for_test() as instance:
        clicked = dg.materialize(
            en.assets, selection=[en.key("input_shards")], instance=instance, resources=resources
        )
        assert clicked.success
        shard = instance.get_dynamic_partitions(en.partitions_def.name or "")[0]
        clicked_shard = dg.materialize(
            en.assets,
            selection=[en.key("submissions")],
            partition_key=shard,
            instance=instance,
            resources=resources,
        )
        assert clicked_shard.success
        runs = [instance.get_run_by_id(r.run_id) for r in (clicked, clicked_shard)]
        resources["maple_costs"].close()
    first, second = runs
    assert first is not None and second is not None
    no_version = {k: v for k, v in EXPECTED.items() if k != "maple/version"}
    assert first.tags.items() >= no_version.items(), first.tags  # it makes version 1
    assert second.tags.items() >= EXPECTED.items(), second.tags
