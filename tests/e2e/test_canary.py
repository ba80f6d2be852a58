"""``maple enrich --canary N`` as a user runs it, against a live emulator over HTTP: a passing
canary's rows are not paid again by the batches; a failing one stops the job with exit 4 and one
line before any batch is created; a rerun of the same template does not send the canary again."""

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.costs import CostLedger
from tests.e2e.cli import maple

ROWS = 40


def enrich(url: str, source: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [
        "enrich", str(source), "--prompt", "Brand of {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(store), "--job", "canaried",
        "--poll-interval", "0.1", "--quiet", "--max-requests-per-batch", "8", *extra,
    ]  # fmt: skip
    return maple(*args, url=url)


def titles(path: Path, count: int, start: int = 0) -> Path:
    pl.DataFrame(
        {"title": [f"Maple Farm oats {i}" for i in range(start, start + count)]}
    ).write_csv(path)
    return path


@pytest.mark.slow
def test_a_passing_canary_is_not_paid_again_nor_rerun(tmp_path: Path) -> None:
    store = tmp_path / "store"
    source = titles(tmp_path / "in.csv", ROWS)
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as server:
        first = enrich(server.url, source, store, "--canary", "10")
        stats = server.stats()
    assert first.returncode == 0, first.stderr
    assert "canary         10 of 10 rows succeeded through openai-realtime" in first.stdout
    assert stats["requests_billed"] == ROWS  # the canary's 10 rows are filled from the store
    assert stats["batches_created"] >= 1
    out = pl.read_csv(tmp_path / "in_enriched.csv")
    assert (out["llm_status"] == "succeeded").all()
    canary_rows = out.filter(pl.col("llm_batch_id").str.starts_with("rt-"))
    assert canary_rows.height == 10 and canary_rows["llm_reused"].all()
    report = orjson.loads((store / "canaried" / "state" / "canary.json").read_bytes())
    assert report["passed"] and report["sample_size"] == 10 and report["success_share"] == 1.0
    with CostLedger(storage_root=str(store)) as ledger:
        booked = [e for e in ledger.job_entries("canaried") if e.shard == "canary"]
    assert [(e.requests, e.mode) for e in booked] == [(10, "realtime")]

    more = titles(tmp_path / "in.csv", ROWS + 8)  # new rows, the same template and model
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as server:
        again = enrich(server.url, more, store, "--canary", "10")
        stats = server.stats()
    assert again.returncode == 0, again.stderr
    assert stats["requests_billed"] == 8  # no second canary: only the new rows are sent
    assert orjson.loads((store / "canaried" / "state" / "canary.json").read_bytes())["run"] == 1


def test_a_failing_canary_stops_before_any_batch(tmp_path: Path) -> None:
    source = titles(tmp_path / "in.csv", ROWS)
    config = EmulatorConfig(batch_seconds=0.2, fail={"refused": 0.9}, seed=3)
    with EmulatorServer(config) as server:
        result = enrich(server.url, source, tmp_path / "store", "--canary", "10")
        stats = server.stats()
    assert result.returncode == 4, result.stderr
    assert stats["batches_created"] == 0 and stats["files_uploaded"] == 0
    assert 0 < stats["requests_billed"] <= 10
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("stopped: canary failed: ")
    assert "top failure refused" in line and "e.g. row " in line
    assert "--canary-min-success" in line
    assert not (tmp_path / "in_enriched.csv").exists()
    shown = maple("status", "canaried", "--storage", str(tmp_path / "store"), url=server.url)
    assert "canary failed" in shown.stdout and line.removeprefix("stopped: ") in shown.stdout


@pytest.mark.slow  # ~9 s: a canary of 2 s answers, cancelled
def test_maple_cancel_during_the_canary_is_a_cancel_not_a_failed_canary(tmp_path: Path) -> None:
    source, store = titles(tmp_path / "items.csv", ROWS), tmp_path / "store"
    config = EmulatorConfig(batch_seconds=0, realtime_latency_s=(2.0, 2.0))
    with EmulatorServer(config) as server:
        args = [
            sys.executable, "-m", "maple_assets.cli", "enrich", str(source), "--prompt",
            "Brand of {title}", "--model", "gpt-4o-mini", "--provider", "emulator",
            "--storage", str(store), "--job", "canaried", "--poll-interval", "0.1", "--quiet",
            "--canary", "10",
        ]  # fmt: skip
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        env.pop("MAPLE_COST_DB", None)
        running = subprocess.Popen(
            args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while server.stats()["realtime_requests"] == 0:
            assert time.monotonic() < deadline and running.poll() is None
            time.sleep(0.05)
        cancelled = maple("cancel", "canaried", "--storage", str(store), url=server.url)
        _, err = running.communicate(timeout=60)
        stats = server.stats()
    assert cancelled.returncode == 0, cancelled.stderr
    assert running.returncode == 4, err
    assert "stopped: cancelled with `maple cancel`" in err and "canary failed" not in err
    assert stats["batches_created"] == 0
    assert not (store / "canaried" / "state" / "canary.json").exists()  # no verdict recorded
