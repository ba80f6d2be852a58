"""Stalled batches through the CLI against emulators over HTTP: a history of quick batches sets
the provider and model's p95 turnaround; a batch the emulator stalls is reported by ``maple
status`` (age vs p95), and with ``--deadline`` its rows go real-time at once instead of waiting
for the deadline."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.batch_history import HistoryFilter
from resources.costs import CostTracker

STALLED_S = 150.0  # a stalled batch would take this long


def cli(url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "maple_assets.cli", *args]


def env(url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"MAPLE_COST_DB", "MAPLE_PRICES"}}
    return {**clean, "MAPLE_EMULATOR_URL": url}


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(url, *args), capture_output=True, text=True, env=env(url), timeout=300, check=False
    )


def enrich(source: Path, store: Path, job: str, *extra: str) -> list[str]:
    return [
        "enrich", str(source), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(store), "--job", job,
        "--output", str(store.parent / f"{job}.parquet"), "--poll-interval", "0.2", "--quiet",
        "--max-requests-per-batch", "4", *extra,
    ]  # fmt: skip


def warm_history(tmp_path: Path) -> tuple[Path, Path]:
    """A history of quick batches (the p95 to stall against) in the store; the slow input."""
    store = tmp_path / "store"
    quick, slow = tmp_path / "quick.csv", tmp_path / "slow.csv"
    pl.DataFrame({"title": [f"quick {i}" for i in range(24)]}).write_csv(quick)
    pl.DataFrame({"title": [f"slow {i}" for i in range(8)]}).write_csv(slow)
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5)) as server:
        warm = run(server.url, *enrich(quick, store, "warm"))
        assert warm.returncode == 0, warm.stderr
    return store, slow


@pytest.mark.slow  # waits out a stalled batch: about 40 s
def test_a_stalled_batch_is_reported_then_escalated_by_the_deadline(tmp_path: Path) -> None:
    store, slow = warm_history(tmp_path)
    stalling = EmulatorConfig(batch_seconds=1.0, stall=1.0, stall_factor=STALLED_S)
    with EmulatorServer(stalling) as server:
        driver = subprocess.Popen(
            cli(server.url, *enrich(slow, store, "late")),
            env=env(server.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            status: dict[str, object] = {}
            for _ in range(120):
                shown = run(
                    server.url, "status", "late", "--storage", str(store), "--format", "json"
                )
                status = orjson.loads(shown.stdout) if shown.returncode == 0 else {}
                if status.get("stalled"):
                    break
                time.sleep(0.5)
            stalls = status["stalled"]
            assert isinstance(stalls, list) and stalls, status
            assert all(s["age_s"] > s["limit_s"] and s["percentile"] == 95 for s in stalls)
            table = run(server.url, "status", "late", "--storage", str(store))
            assert "stalled: batch " in table.stdout and "p95 turnaround" in table.stdout
            listing = run(server.url, "status", "--storage", str(store))
            assert "stalled" in listing.stdout
        finally:
            driver.send_signal(signal.SIGINT)  # the batches keep running at the provider
            driver.communicate(timeout=120)
        started = time.monotonic()
        done = run(server.url, *enrich(slow, store, "late", "--deadline", "2h"))
        wall = time.monotonic() - started
        stats = server.stats()
    assert done.returncode == 0, done.stderr + done.stdout
    assert wall < STALLED_S / 2  # neither the stalled batches nor the deadline were waited for
    out = pl.read_parquet(tmp_path / "late.parquet")
    assert set(out["llm_status"]) == {"succeeded"} and out.height == 8
    assert stats["realtime_requests"] >= 1 and stats["bodies_billed_twice"] == 0
    with CostTracker(storage_root=str(store)) as ledger:
        late = ledger.batch_history(HistoryFilter(job="late"))
    assert "cancelled" in set(late["status"])


@pytest.mark.slow  # two CLI runs, about 70 s here (tests/integration/test_stall_flex.py: fast)
def test_a_stalled_batch_under_a_deadline_goes_to_the_flex_lane(tmp_path: Path) -> None:
    """With time to spare before the deadline, a stalled batch's rows take the flex lane
    (real-time answers at batch prices) rather than standard real-time."""
    store, slow = warm_history(tmp_path)
    stalling = EmulatorConfig(batch_seconds=1.0, stall=1.0, stall_factor=STALLED_S)
    with EmulatorServer(stalling) as server:
        started = time.monotonic()
        done = run(server.url, *enrich(slow, store, "late", "--deadline", "2h"))
        wall = time.monotonic() - started
        stats = server.stats()
    assert done.returncode == 0, done.stderr + done.stdout
    assert wall < STALLED_S / 2
    out = pl.read_parquet(tmp_path / "late.parquet")
    assert set(out["llm_status"]) == {"succeeded"} and out.height == 8
    assert out["llm_batch_id"].str.starts_with("rt-flex-").all()
    assert stats["flex_requests"] == 8 and stats["bodies_billed_twice"] == 0
    with CostTracker(storage_root=str(store)) as ledger:
        entries = [e for e in ledger.job_entries("late") if e.requests]
    assert {e.batch_id[:8] for e in entries} == {"rt-flex-"}
    assert all(e.cost_usd == pytest.approx(e.realtime_cost_usd / 2) for e in entries)
