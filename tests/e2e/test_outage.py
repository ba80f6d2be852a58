"""A provider outage mid-job is survived: the emulator refuses every connection for 60 s while
``maple enrich`` polls its batches, then comes back with its state; the job completes, paying
for every row once."""

import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS, OUTAGE_S = 12, 60.0


@pytest.mark.slow
def test_a_60_second_outage_mid_job_is_survived(tmp_path: Path) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    cmd = [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(tmp_path / "store"), "--job", "outage",
        "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", "4",
        "--poll-interval", "0.2", "--quiet",
    ]  # fmt: skip
    with EmulatorServer(EmulatorConfig(batch_seconds=3.0)) as server:
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        state = tmp_path / "store" / "outage" / "state"
        deadline = time.monotonic() + 120
        while len(list(state.glob("*/submission-1.json"))) < 3:  # every batch is out
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        server.pause()
        time.sleep(OUTAGE_S)
        assert proc.poll() is None, proc.communicate()  # still waiting out the outage
        server.resume()
        out, err = proc.communicate(timeout=180)
        stats = server.stats()
    assert proc.returncode == 0, err[-3000:]
    assert f"succeeded      {ROWS}" in out
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == ROWS, stats
    assert stats["batches_created"] == 3, stats
