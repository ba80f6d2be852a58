"""``maple_batch_stats`` through Dagster's machinery: the sensor-driven graph records its
batches in the history, then the day's partition materializes the table, the charts in Markdown
metadata, and the HTML report and CSV under the storage root."""

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_assets.definitions import defs
from maple_assets.factory import enrichment
from maple_assets.graph.batch_stats import BATCH_STATS, batch_stats_asset
from maple_assets.wiring import maple_resources
from tests.integration.test_graph import run_graph


@pytest.mark.slow  # ~13-19 s: a graph run and charts
def test_the_days_batches_as_metadata_charts_and_a_report(
    tmp_path: Path, emulator_server: EmulatorServer, tricky_table: pl.DataFrame, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)

    @dg.asset
    def items() -> pl.DataFrame:
        rows = pl.concat([tricky_table] * 3).with_row_index("n")
        return rows.with_columns(pl.col("n").cast(pl.String))

    en = enrichment(
        name="stats_items", source=items, prompt="{n}: {title}", model="gpt-4o-mini",
        provider="emulator", team="bakery", max_requests_per_batch=5,
    )  # fmt: skip
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    stats_asset = batch_stats_asset(start_date="2026-01-01")
    today = datetime.now(UTC).date()
    with dg.instance_for_test() as instance:
        run_graph(en, [items], resources, instance)
        days = {}
        for day in (today, today - timedelta(days=1)):
            result = dg.materialize(
                [stats_asset], partition_key=str(day), instance=instance, resources=resources
            )
            assert result.success
            [mat] = result.asset_materializations_for_node("maple_batch_stats")
            days[day] = mat.metadata
    batches = emulator_server.stats()["batches_created"]
    assert batches == 4  # 18 rows, 5 per shard
    meta = days[today]
    assert meta["batches"] == dg.IntMetadataValue(batches)
    assert meta["completed"] == dg.IntMetadataValue(batches)
    markdown = str(meta["stats"].value)
    assert "| emulator | gpt-4o-mini | 4 | 4 |" in markdown
    images = re.findall(r"\(data:image/png;base64,([^)]+)\)", markdown)
    assert len(images) == 3 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    report = Path(str(meta["report"].value))
    assert report == tmp_path / "store" / "_reports" / "batch_stats" / f"{today}.html"
    assert report.read_text().count("data:image/png;base64,") == 3
    frame = pl.read_csv(Path(str(meta["batches_csv"].value)))
    assert frame.height == batches and set(frame["team"]) == {"bakery"}
    assert days[today - timedelta(days=1)]["batches"] == dg.IntMetadataValue(0)


def test_the_code_location_has_the_daily_asset() -> None:
    node = defs.resolve_asset_graph().get(BATCH_STATS)
    assert isinstance(node.partitions_def, dg.DailyPartitionsDefinition)
    assert node.automation_condition is not None
