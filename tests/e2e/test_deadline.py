"""``--deadline`` through ``maple enrich`` against the emulator over HTTP: a deadline shorter
than the emulator's batch time finishes every row through the real-time path."""

import re
import time
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from resources.costs import CostTracker
from tests.e2e.cli import maple

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
ROWS = 40


def summary_number(stdout: str, label: str) -> float:
    match = re.search(rf"^{label}\s+([\d,.]+)", stdout, re.MULTILINE)
    assert match, f"no {label!r} in:\n{stdout}"
    return float(match.group(1).replace(",", ""))


@pytest.mark.slow  # about 25 s: the deadline has to pass
def test_deadline_shorter_than_the_batch_sends_the_rest_real_time(tmp_path: Path) -> None:
    source = tmp_path / "items.csv"
    pl.read_csv(CATALOG, infer_schema=False).head(ROWS).write_csv(source)
    # A batch would take 25 s; the deadline is 10 s (on a loaded machine the CLI needs a few
    # seconds before its first batch goes out, and the test needs one out before the deadline).
    config = EmulatorConfig(batch_seconds=25.0)
    with EmulatorServer(config) as server:
        started = time.monotonic()
        result = maple(
            server.url,
            "enrich", str(source), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "emulator", "--storage", str(tmp_path / "store"), "--job", "late",
            "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2", "--quiet",
            "--max-requests-per-batch", "20", "--deadline", "10s",
        )  # fmt: skip
        wall = time.monotonic() - started
        stats = server.stats()
    assert result.returncode == 0, result.stderr + result.stdout
    assert wall < 60
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["batches_cancelled"] >= 1 and stats["bodies_billed_twice"] == 0
    batch_rows = summary_number(result.stdout, "batch rows")
    late_rows = summary_number(result.stdout, "real-time rows")
    assert late_rows > 0 and batch_rows + late_rows == ROWS
    assert stats["realtime_requests"] == late_rows  # only the unrun rows went real-time
    with CostTracker(storage_root=str(tmp_path / "store")) as costs:
        entries = costs.job_entries("late")
    late = [e for e in entries if e.mode == "realtime"]
    assert sum(e.requests for e in late) == late_rows
    assert all(e.cost_usd == e.realtime_cost_usd for e in late)  # real-time price
    premium = summary_number(result.stdout, "deadline USD")
    assert premium > 0


def test_bad_deadline_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        result = maple(
            server.url,
            "enrich", str(CATALOG), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "emulator", "--storage", str(tmp_path / "store"), "--quiet",
            "--deadline", "6 hours",
        )  # fmt: skip
        stats = server.stats()
    assert result.returncode == 2
    assert "--deadline" in result.stderr and "6h" in result.stderr
    assert stats["files_uploaded"] == 0 and stats["batches_created"] == 0
