"""Per-partition metadata is that partition's figures, also when one run covers many shards
(the CLI driver's range runs, single-run backfills): no shard shows the whole job's totals."""

from pathlib import Path

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def test_a_range_run_gives_each_shard_its_own_figures(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"loaf {i}" for i in range(7)]}).write_csv(table)
    en = enrichment(
        name="per_shard", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), max_requests_per_batch=3,
        max_enqueued_tokens=10_000_000,
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    with dg.instance_for_test() as instance:
        runner = Runner(en, resources, instance, poll_interval_s=0.05, quiet=True)
        runner.materialize(en.key("input_shards"))
        runner.materialize(en.key("submissions"), "s00000", "s00002")  # one run, three shards
        runner.run()
        again = Runner(en, resources, instance, poll_interval_s=0.05, quiet=True)  # after run()
        again.materialize(en.key("raw_responses"), "s00000", "s00002")  # one run, three shards
        check = dg.AssetCheckKey(en.key("raw_responses"), "failed_rows")
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=20)
        resources["maple_costs"].close()
        records = instance.fetch_materializations(en.key("submissions"), limit=20).records
    figures = {
        r.partition_key: {k: v.value for k, v in r.asset_materialization.metadata.items()}
        for r in records
    }
    assert {k: m["requests"] for k, m in figures.items()} == {"s00000": 3, "s00001": 3, "s00002": 1}
    assert all(m["shards_in_run"] == 3 for m in figures.values())
    newest = history[:3]  # the range run's: each shard's own evaluation, on its partition
    assert len({r.run_id for r in newest}) == 1
    in_range = [
        r.event.dagster_event.asset_check_evaluation_data
        for r in newest
        if r.event is not None and r.event.dagster_event is not None
    ]
    assert sorted(e.partition for e in in_range) == ["s00000", "s00001", "s00002"]
    assert {e.description for e in in_range} == {"no row of 3 failed", "no row of 1 failed"}
