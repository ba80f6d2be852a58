"""``--deadline`` through ``maple enrich`` against the emulator over HTTP: a deadline shorter
than the emulator's batch time finishes every row through the real-time path."""

import json
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
            "enrich", str(source), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "emulator", "--storage", str(tmp_path / "store"), "--job", "late",
            "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2", "--quiet",
            "--max-requests-per-batch", "20", "--deadline", "10s", url=server.url,
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
            "enrich", str(CATALOG), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "emulator", "--storage", str(tmp_path / "store"), "--quiet",
            "--deadline", "6 hours", url=server.url,
        )  # fmt: skip
        stats = server.stats()
    assert result.returncode == 2
    assert "--deadline" in result.stderr and "6h" in result.stderr
    assert stats["files_uploaded"] == 0 and stats["batches_created"] == 0


def _submitted(store: Path, job: str) -> list[tuple[float, str]]:
    """When each shard attempt of ``job`` was recorded (file time, seconds after the version
    began), with its batch id."""
    state = store / job / "state"
    start = float(json.loads((state / "version.json").read_text())["created_at"])
    records = state.glob("*/submission-*.json")
    return sorted(
        (f.stat().st_mtime - start, json.loads(f.read_text())["batch_id"]) for f in records
    )


@pytest.mark.slow  # about 30 s: 3,000 rows, most of them real-time
def test_shards_waiting_for_a_probed_queue_go_real_time_before_the_deadline_is_due(
    tmp_path: Path,
) -> None:
    """60 s batches, no queue limit given (OpenAI's is probed one validated batch at a time),
    3,000 rows in 30 shards, --deadline 15s: the shards that could not end as batches in time
    leave the queue for real time at once, not when the deadline is due, and the one batch out
    is cancelled once it is expected to end past the deadline (before, shards waited for
    validations one after another and the job ended 50-56 s in). Real time at 60,000 RPM: at
    the emulator's nominal 10,000 the 3,000 real-time requests alone take 18 s."""
    source = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(3000)]}).write_csv(source)
    store = tmp_path / "store"
    with EmulatorServer(EmulatorConfig(batch_seconds=60.0, rpm=60_000)) as server:
        result = maple(
            "enrich", str(source), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "emulator", "--storage", str(store), "--job", "probed",
            "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2", "--quiet",
            "--max-requests-per-batch", "100", "--deadline", "15s", url=server.url,
        )  # fmt: skip
        stats = server.stats()
    assert result.returncode == 0, result.stderr + result.stdout
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == 3000 and out["llm_status"].to_list() == ["succeeded"] * 3000
    assert stats["bodies_billed_twice"] == 0
    late = [at for at, batch_id in _submitted(store, "probed") if batch_id.startswith("rt-")]
    due = 15.0 - 1.5  # the deadline less its margin
    assert len(late) >= 20 and min(late) < 6.0 < due  # escalated while the shards waited
    assert stats["batches_created"] <= 2  # not one batch after another behind validations
    assert stats["batches_cancelled"] == stats["batches_created"]
    assert summary_number(result.stdout, "real-time rows") >= 2500
    version = json.loads((store / "probed" / "state" / "version.json").read_text())
    finished = (tmp_path / "out.parquet").stat().st_mtime - float(version["created_at"])
    # measured 14.9 s on 2 shared cores; the cancelled batch settles 6 s after its cancel
    assert finished < 18.0, finished
