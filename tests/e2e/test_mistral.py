"""Mistral through the real wire: what ``--provider mistral`` does that the conformance suite
(``tests/conformance``, which runs ``mistral`` and ``mistral-realtime`` to their end, kills them
and cancels them) does not hold every provider to. A failed line's body is a JSON string of
Mistral's error object: its message and class reach the row, billed nothing."""

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import clean_env, maple
from tests.e2e.hostile import table_job

ROWS = 12
MODEL = "mistral-small-latest"


def test_lines_mistral_failed_come_back_as_failed_rows_billed_nothing(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, fail={"invalid_request": 1.0})
    with EmulatorServer(config) as server:
        args = table_job(tmp_path, "enrich", "mistral", ROWS, "--poll-interval", "0.1")
        args[args.index("--model") + 1] = MODEL
        env = {"MISTRAL_BASE_URL": server.url, "MISTRAL_API_KEY": "mistral-key"}
        done = maple(*args, clean=True, drop=("MISTRAL_",), **env)
        stats = server.stats()
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert done.returncode == 3, done.stderr  # every row failed
    assert out["llm_status"].unique().to_list() == ["failed"]
    assert out["llm_failure_class"].unique().to_list() == ["invalid_request"]
    assert out["llm_error"].str.starts_with("Invalid request: ").all()
    assert stats["requests_billed"] == 0 and stats["batches_created"] == 1


@pytest.mark.slow
def test_maple_status_warns_when_a_batchs_results_may_expire_within_the_hour(
    tmp_path: Path,
) -> None:
    """Mistral keeps batch results 24 hours: a batch in flight submitted 23.5 hours ago (its
    record aged by hand while the job waits on a slow batch, then killed) is named by
    ``maple status``, one in flight for an hour is not."""
    store = tmp_path / "store" / "hostile" / "state"
    with EmulatorServer(EmulatorConfig(batch_seconds=600, control_fail=0)) as server:
        args = table_job(tmp_path, "enrich", "mistral", ROWS, "--max-requests-per-batch", "6")
        args[args.index("--model") + 1] = MODEL
        env = {"MISTRAL_BASE_URL": server.url, "MISTRAL_API_KEY": "mistral-key"}
        command = [sys.executable, "-m", "maple_assets.cli", *args]
        running = subprocess.Popen(command, env=clean_env(**env), stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while len(records := sorted(store.glob("*/submission-1.json"))) < 2:
                assert running.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        finally:
            running.kill()
            running.communicate()
    now = datetime.now(UTC)
    for record, age in zip(records, (timedelta(hours=23.5), timedelta(hours=1)), strict=False):
        held = json.loads(record.read_text())
        held["submitted_at"] = (now - age).isoformat()
        record.write_text(json.dumps(held))
    shown = maple("status", "hostile", "--storage", str(tmp_path / "store"), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert len(status["expiring"]) == 1
    assert "may expire within 30m" in status["expiring"][0]
    assert "mistral keeps them 24.0h" in status["expiring"][0]
    table = maple("status", "hostile", "--storage", str(tmp_path / "store"))
    assert "warning: results of batch" in table.stdout
