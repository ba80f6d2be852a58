"""The enrichment sensor's real tick path with a provider queue limit: it sends only what fits
and says why the other shards wait."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import maple_resources


def tick(en: Enrichment, defs: dg.Definitions, resources: dict[str, Any], instance: Any) -> Any:
    with (
        dg.partition_loading_context(dynamic_partitions_store=instance),
        dg.build_sensor_context(instance=instance, resources=resources, definitions=defs) as ctx,
    ):
        return en.sensor.evaluate_tick(ctx)


def test_sensor_sends_what_fits_and_says_why_the_rest_waits(
    tmp_path: Path, tricky_table: pl.DataFrame, monkeypatch: Any
) -> None:
    rows = pl.concat([tricky_table] * 4).with_row_index("n").with_columns(pl.col("n").cast(str))
    source = tmp_path / "items.parquet"
    rows.write_parquet(source)
    with EmulatorServer(EmulatorConfig(batch_seconds=30)) as server:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
        en = enrichment(
            name="queued",
            source=str(source),
            prompt="{n}: {title}",
            model="gpt-4o-mini",
            provider="emulator",
            max_requests_per_batch=8,  # 3 shards of about 110 tokens
            max_enqueued_tokens=150,  # room for one shard at a time
        )
        resources = maple_resources([en], storage_root=str(tmp_path / "store"))
        defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
        with dg.instance_for_test() as instance:
            assert dg.materialize(
                en.assets,
                selection=[en.key("input_shards")],
                instance=instance,
                resources=resources,
            ).success
            first = tick(en, defs, resources, instance)
            submits = [r for r in first.run_requests if ":submit:" in str(r.run_key)]
            assert [r.partition_key for r in submits] == ["s00000"]
            assert dg.materialize(
                en.assets,
                selection=[en.key("submissions")],
                partition_key="s00000",
                instance=instance,
                resources=resources,
            ).success
            second = tick(en, defs, resources, instance)
        stats = server.stats()
    assert not second.run_requests
    assert "2 shard(s) wait for the provider queue" in (second.skip_message or "")
    assert "limit 150" in (second.skip_message or "")
    assert stats["batches_created"] == 1
