"""Hostile case: ``maple cancel`` while a real-time job sends. The command names no batch (a
real-time attempt has none at the provider) and exits 0; the running job releases no request
after it has seen the stop (within a second), ends stopped (exit 4), and the rerun sends only the
rows the cancelled run left, none twice.

Before, ``maple cancel`` ended "unexpected AttributeError" (exit 1) and the job sent and paid
for every row before it stopped."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import clean_env
from tests.e2e.hostile import maple_at, one_line, table_job

ROWS = 600


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_maple_cancel_stops_a_real_time_job_within_a_second_and_the_rerun_sends_the_rest(
    tmp_path: Path,
) -> None:
    args = table_job(tmp_path, "enrich", "openai-realtime", ROWS, "--rpm", "300")  # 5 a second
    settings = {"OPENAI_API_KEY": "sk-hostile-test-key"}
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        running = subprocess.Popen(
            [sys.executable, "-m", "maple_assets.cli", *args],
            env=clean_env(OPENAI_BASE_URL=f"{server.url}/v1", **settings),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while server.stats()["requests_billed"] < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        cancel, _ = maple_at(server.url, "cancel", "hostile", "--storage", str(tmp_path / "store"))
        at_cancel = server.stats()["requests_billed"]
        _, stderr = running.communicate(timeout=60)
        stopped = server.stats()
        rerun, _ = maple_at(server.url, *args[:-2])  # without --rpm: the rest at full speed
        after = server.stats()
    assert cancel.returncode == 0, cancel.stderr
    assert "cancelled 0 batch(es)" in cancel.stdout
    assert running.returncode == 4, stderr
    assert one_line(stderr).startswith("stopped: cancelled with `maple cancel`")
    # seen within a second (1 s of checks + the requests then in flight, at 5 a second)
    assert 10 <= at_cancel <= stopped["requests_billed"] <= at_cancel + 15, (at_cancel, stopped)
    assert rerun.returncode == 0, rerun.stderr
    assert f"sent           {ROWS - stopped['requests_billed']:,}  (by this run)" in rerun.stdout
    assert after["requests_billed"] == ROWS
    assert after["bodies_billed_twice"] == 0
