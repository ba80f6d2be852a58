"""``maple_batch_stats`` through Dagster's machinery: the sensor-driven graph records its
batches in the history, then one materialization (no partition to choose) covers yesterday and
today: each day's table and charts in Markdown metadata, its HTML report and CSV under the
storage root."""

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
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    with dg.instance_for_test() as instance:
        run_graph(en, [items], resources, instance)
        result = dg.materialize([batch_stats_asset()], instance=instance, resources=resources)
        assert result.success
        [mat] = result.asset_materializations_for_node("maple_batch_stats")
    meta = mat.metadata
    batches = emulator_server.stats()["batches_created"]
    assert batches == 4  # 18 rows, 5 per shard
    assert meta["batches"] == dg.IntMetadataValue(batches)
    assert meta["completed"] == dg.IntMetadataValue(batches)
    days = str(meta["days"].value)
    assert f"| {today} | 4 | 4 |" in days and f"| {yesterday} | 0 | 0 |" in days
    markdown = str(meta["stats"].value)
    assert markdown.index(f"### {today}") < markdown.index(f"### {yesterday}")  # newest first
    assert "| emulator | gpt-4o-mini | 4 | 4 |" in markdown
    images = re.findall(r"\(data:image/png;base64,([^)]+)\)", markdown)
    assert len(images) >= 3 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    reports = tmp_path / "store" / "_reports" / "batch_stats"
    report = Path(str(meta["report"].value))
    assert report == reports / f"{today}.html"
    assert report.read_text().count("data:image/png;base64,") == 3
    frame = pl.read_csv(Path(str(meta["batches_csv"].value)))
    assert frame.height == batches and set(frame["team"]) == {"bakery"}
    assert pl.read_csv(reports / f"{yesterday}.csv").height == 0


def test_the_code_location_has_the_nightly_asset() -> None:
    node = defs.resolve_asset_graph().get(BATCH_STATS)
    assert node.partitions_def is None  # the global "Materialize all" picks no days
    assert node.automation_condition is not None
