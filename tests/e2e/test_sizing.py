"""Shard sizes from the batch history under ``--deadline``: on an emulator whose batches take
1 s plus 30 s per 1,000 requests, once a history exists, a deadline that one full batch would
miss is met through smaller batches (no row goes real-time), one that a full batch meets keeps
it; ``--dry-run`` and ``maple status`` say what was chosen, why, and when the job should end."""

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple

ROWS = 600


def table(path: Path, rows: int, tag: str) -> Path:
    pl.DataFrame({"title": [f"{tag} item {i}" for i in range(rows)]}).write_csv(path)
    return path


def enrich(url: str, tmp: Path, job: str, rows: int, *flags: str) -> tuple[float, str]:
    started = time.monotonic()
    result = maple(
        "enrich", str(table(tmp / f"{job}.csv", rows, job)), "--prompt", "Brand of: {title}",
        "--model", "gpt-4o-mini", "--provider", "emulator", "--storage", str(tmp / "store"),
        "--job", job, "--output", str(tmp / f"{job}_out.parquet"), "--poll-interval", "0.2",
        "--quiet", *flags, url=url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    return time.monotonic() - started, result.stdout


def status(url: str, tmp: Path, job: str) -> dict[str, object]:
    result = maple("status", job, "--storage", str(tmp / "store"), "--format", "json", url=url)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def wait_for_eta(url: str, tmp: Path, job: str) -> dict[str, Any]:
    """The job's first ETA with a p90 in ``maple status --format json`` while it runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (tmp / "store" / job / "state" / "spec.json").exists():
            eta = status(url, tmp, job)["eta"]
            if isinstance(eta, dict) and eta["p90"] is not None:
                return eta
        time.sleep(0.5)
    raise AssertionError(f"no ETA for {job} within 60 s")


@pytest.mark.slow  # about 80 s: a history, then two jobs that wait for their batches
def test_a_deadline_full_batches_would_miss_is_met_by_smaller_ones(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=1.0, batch_seconds_per_1k=30.0)
    with EmulatorServer(config) as server:
        url = server.url
        dry = maple(
            "enrich", str(table(tmp_path / "dry.csv", ROWS, "dry")), "--prompt", "{title}",
            "--model", "gpt-4o-mini", "--provider", "emulator", "--storage",
            str(tmp_path / "store"), "--dry-run", "--deadline", "20s", url=url,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert "no batch history" in dry.stdout and "expected finish" in dry.stdout
        # the history: three batches of 100 requests (4 s each) and one of 200 (7 s)
        enrich(url, tmp_path, "small", 300, "--max-requests-per-batch", "100")
        enrich(url, tmp_path, "large", 200)
        dry = maple(
            "enrich", str(tmp_path / "dry.csv"), "--prompt", "{title}", "--model",
            "gpt-4o-mini", "--provider", "emulator", "--storage", str(tmp_path / "store"),
            "--dry-run", "--deadline", "20s", url=url,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert "past the target" in dry.stdout and "p90" in dry.stdout, dry.stdout
        # one batch of 600 takes 19 s, past the 18 s before the deadline's margin
        before = server.stats()
        enrich(url, tmp_path, "tight", ROWS, "--deadline", "20s")
        tight = status(url, tmp_path, "tight")
        after = server.stats()
        # the same command again resumes the version: its recorded shards, nothing sent
        enrich(url, tmp_path, "tight", ROWS, "--deadline", "20s")
        again = status(url, tmp_path, "tight")
        assert server.stats()["requests_received"] == after["requests_received"]
        # a full batch of 600 meets a minute's deadline: it stays one batch; while it runs,
        # `maple status` shows when it should end
        running = threading.Thread(
            target=enrich, args=(url, tmp_path, "loose", ROWS, "--deadline", "60s")
        )
        running.start()
        eta = wait_for_eta(url, tmp_path, "loose")
        read_at = datetime.now(UTC)
        running.join()
        loose = status(url, tmp_path, "loose")
    assert eta["p50"] is not None and eta["p90"] is not None and "batches" in eta["basis"]
    p50, p90 = datetime.fromisoformat(eta["p50"]), datetime.fromisoformat(eta["p90"])
    assert read_at < p90 and p50 <= p90  # how often the p90 covers the end: bench/eta.py
    sizing = tight["sizing"]
    assert isinstance(sizing, dict) and 1 < len(tight["shards"]) <= 6  # type: ignore[arg-type]
    assert sizing["size"] < ROWS and "past the target" in sizing["reason"]
    assert tight["succeeded"] == ROWS
    assert [s["shard"] for s in again["shards"]] == [s["shard"] for s in tight["shards"]]  # type: ignore[union-attr]
    assert again["sizing"] == sizing
    assert after["realtime_requests"] == before["realtime_requests"]  # met by batches alone
    assert after.get("batches_cancelled", 0) == before.get("batches_cancelled", 0)
    assert loose["succeeded"] == ROWS and len(loose["shards"]) == 1  # type: ignore[arg-type]
    assert "full batches" in loose["sizing"]["reason"]  # type: ignore[index]
    assert tight["eta"] == {"p50": None, "p90": None, "basis": "every shard is final"}
