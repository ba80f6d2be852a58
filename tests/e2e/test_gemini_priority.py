"""Gemini's priority tier through the real wire: over the project's priority limit Gemini serves
a priority request at standard and says so only in the ``x-gemini-service-tier`` header. Each
answer is billed at the tier the header names: a downgraded row costs the standard price, and
the downgrades are counted in the run's summary and in ``maple costs``."""

import json
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import table_job

ROWS, LIMIT = 6, 2


@pytest.mark.slow
def test_rows_served_at_standard_are_billed_at_standard_and_counted(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, gemini_priority_limit=LIMIT)
    with EmulatorServer(config) as server:
        args = table_job(tmp_path, "enrich", "gemini-priority", ROWS, "--max-concurrency", "1")
        args[args.index("--model") + 1] = "gemini-2.5-flash"
        env = {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "gemini-key"}
        done = maple(*args, clean=True, drop=("GEMINI_",), **env)
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    assert (stats["priority_requests"], stats["priority_downgraded"]) == (LIMIT, ROWS - LIMIT)
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    costs = sorted(out["llm_cost_usd"].to_list())
    standard, priority = costs[0], costs[-1]
    assert costs == [standard] * (ROWS - LIMIT) + [priority] * LIMIT  # the rows' tokens alike
    assert priority == 2 * standard  # the priority tier: twice the standard price
    assert "downgraded     4" in done.stdout
    shown = maple("costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json")
    [row] = json.loads(shown.stdout)
    assert row["downgraded_requests"] == ROWS - LIMIT
    assert row["cost_usd"] == sum(costs)
