"""A target the batch history says full batches miss cuts smaller shards, and the assets'
metadata say so: ``input_shards`` the size and why, ``submissions`` the ETA as of its run,
``merged`` the finish the sizing planned and whether it was met."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.model import BatchState, Submission
from maple_engine.providers.registry import build_provider


def history(root: Path) -> None:
    """Six emulator batches of 10 and 30 requests: 1 s + 0.2 s per request."""
    polled = []
    for i, size in enumerate([10, 30] * 3):
        created = datetime.now(UTC) - timedelta(hours=1)
        end = created + timedelta(seconds=1 + 0.2 * size)
        times = (("created", created.timestamp()), ("ended", end.timestamp()))
        sub = Submission("emulator", "old", f"s{i}", 1, f"b{i}", size, "h", created.isoformat())
        polled.append((sub, BatchState(f"b{i}", "completed", True, times=times)))
    with CostLedger(storage_root=str(root)) as ledger:
        ledger.record_batches(BatchLabels("gpt-4o-mini", "t"), polled)


def metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, object]:
    record = instance.fetch_materializations(key, limit=1).records[0]
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_a_target_sizes_the_shards_and_the_metadata_show_the_eta(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    history(store)
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"loaf {i}" for i in range(40)]}).write_csv(table)
    en = enrichment(
        name="sized", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), target_hours=0.002,
        max_enqueued_tokens=10_000_000,
    )  # fmt: skip  # 7.2 s: one batch of 40 takes 9 s, two of 20 take 5 s
    resources = wire_resources(
        str(store), {"emulator": build_provider("emulator", emulator_server.url)}
    )
    with dg.instance_for_test() as instance:
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        resources["maple_costs"].close()
        shards = metadata(instance, en.key("input_shards"))
        submissions = metadata(instance, en.key("submissions"))
        merged = metadata(instance, en.merged_key)
    assert (shards["shards"], shards["shard_size"]) == (2, 20)
    assert "past the target" in str(shards["shard_size_reason"])
    assert {"eta_p50", "eta_p90", "eta_basis"} <= set(submissions)
    assert "emulator gpt-4o-mini batches" in str(submissions["eta_basis"])
    assert str(merged["eta_p90"]) >= str(merged["eta_p50"]) != "-"
    assert isinstance(merged["eta_p90_met"], bool) and "finished_at" in merged
