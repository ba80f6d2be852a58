"""``maple cancel`` on a running ``maple enrich --provider gemini``: the Gemini batches are
cancelled at the provider (``batches/{id}:cancel``), the job stops, ``maple status`` says so."""

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import polars as pl
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 10


def test_cancel_stops_a_running_gemini_job(tmp_path: Path) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_csv(table)
    store = tmp_path / "store"
    args = [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", "gemini-2.5-flash",
        "--provider", "gemini", "--storage", str(store), "--job", "cat",
        "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", "5",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip
    with EmulatorServer(EmulatorConfig(batch_seconds=20, control_fail=0)) as server:
        env = {**os.environ, "GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "test-key"}
        running = subprocess.Popen(
            args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while len(list(store.glob("cat/state/*/submission-1.json"))) < 2:
            assert time.monotonic() < deadline, "the job never submitted its batches"
            time.sleep(0.2)
        cancel = [MAPLE, "cancel", "cat", "--storage", str(store)]
        cancelled = subprocess.run(
            cancel, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelled 2 batch(es)" in cancelled.stdout
        _, err = running.communicate(timeout=90)
        assert running.returncode == 4, err  # 4: stopped early (cancel)
        assert "stopped: cancelled with `maple cancel`" in err
        states = [b.state for b in server.state.gemini.batches.values()]
        assert states == ["BATCH_STATE_CANCELLED"] * 2
    result = CliRunner().invoke(
        main, ["status", "cat", "--storage", str(store), "--format", "json"], env=env
    )
    after = orjson.loads(result.stdout)
    assert after["stopped"].startswith("cancelled")
    assert set(after["failed_by_class"]) == {"expired"}  # rows the cancelled batches never ran
