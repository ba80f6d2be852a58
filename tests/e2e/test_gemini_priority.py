"""Gemini's service tiers through the real wire: over the project's priority limit Gemini serves
a priority request at standard and says so only in the ``x-gemini-service-tier`` header. Each
answer is billed at the tier the header names: a downgraded row costs the standard price, and
the downgrades are counted in the run's summary and in ``maple costs``. A flex request shed
until its sends run out goes to standard real time, never a failed row."""

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import table_job

ROWS, LIMIT = 6, 2


def gemini_job(
    tmp_path: Path, config: EmulatorConfig, provider: str, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, int], pl.DataFrame]:
    """``maple enrich`` of `ROWS` rows on ``provider`` against an emulator of ``config``: the
    run, the emulator's counters and the output."""
    with EmulatorServer(config) as server:
        args = table_job(tmp_path, "enrich", provider, ROWS, *extra)
        args[args.index("--model") + 1] = "gemini-2.5-flash"
        env = {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "gemini-key"}
        done = maple(*args, clean=True, drop=("GEMINI_",), **env)
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    return done, stats, out


@pytest.mark.slow
def test_rows_served_at_standard_are_billed_at_standard_and_counted(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, gemini_priority_limit=LIMIT)
    done, stats, out = gemini_job(tmp_path, config, "gemini-priority", "--max-concurrency", "1")
    assert (stats["priority_requests"], stats["priority_downgraded"]) == (LIMIT, ROWS - LIMIT)
    costs = sorted(out["llm_cost_usd"].to_list())
    standard, priority = costs[0], costs[-1]
    assert costs == [standard] * (ROWS - LIMIT) + [priority] * LIMIT  # the rows' tokens alike
    assert priority == 2 * standard  # the priority tier: twice the standard price
    assert "downgraded     4" in done.stdout
    shown = maple("costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json")
    [row] = json.loads(shown.stdout)
    assert row["downgraded_requests"] == ROWS - LIMIT
    assert row["cost_usd"] == sum(costs)


@pytest.mark.slow
def test_a_request_flex_sheds_until_its_sends_run_out_goes_standard_not_failed(
    tmp_path: Path,
) -> None:
    """Every flex request is shed (429 RESOURCE_EXHAUSTED) and ``--retry rate_limited=0``
    leaves each one send on flex: each row is then sent at standard real time, succeeds, is
    billed at the standard price and counted downgraded; none fails."""
    config = EmulatorConfig(batch_seconds=0, control_fail=0, flex_unavailable=1.0)
    done, stats, _ = gemini_job(tmp_path, config, "gemini-flex", "--retry", "rate_limited=0")
    assert stats["flex_429"] == ROWS and stats["requests_billed"] == ROWS, stats
    assert f"downgraded     {ROWS}" in done.stdout
    shown = maple("costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json")
    [row] = json.loads(shown.stdout)
    assert row["downgraded_requests"] == ROWS
    assert row["savings_usd"] == pytest.approx(0.0, abs=1e-12)  # at standard real-time prices
