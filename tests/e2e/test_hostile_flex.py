"""Hostile case: ``--provider openai-flex`` while flex has no capacity (every flex request
answered 429 "resource unavailable", with a 0.1 s retry-after). Those 429s are retried (a row
is not failed for a provider's passing lack of capacity), but with exponential backoff over the
row's sends in all its attempts, the server's short wait only a floor: the provider is asked
less and less often. The job stays stoppable with ``maple cancel``.

Before, each attempt honoured the 0.1 s wait, spent its 12 sends per row in about a second,
and the next attempt began at once: 2,643 requests in the first minute for 20 rows, without end.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import clean_env
from tests.e2e.hostile import maple_at, outcome_line, table_job

WATCH_S = 20.0


@pytest.mark.slow  # ~30 s: it watches the job for 20 s
def test_flex_without_capacity_backs_off_instead_of_hammering_and_cancel_stops_it(
    tmp_path: Path,
) -> None:
    args = table_job(tmp_path, "enrich", "openai-flex", 20)
    config = EmulatorConfig(batch_seconds=0, flex_unavailable=1.0, flex_delay_s=0.0)
    with EmulatorServer(config) as server:
        running = subprocess.Popen(
            [sys.executable, "-m", "maple_assets.cli", *args],
            env=clean_env(OPENAI_BASE_URL=f"{server.url}/v1", OPENAI_API_KEY="sk-hostile-key"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while server.stats()["flex_requests"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(WATCH_S)
        asked = server.stats()["flex_requests"]
        assert running.poll() is None, running.communicate()  # still waiting for capacity
        cancel, _ = maple_at(server.url, "cancel", "hostile", "--storage", str(tmp_path / "store"))
        _, stderr = running.communicate(timeout=60)
        stats = server.stats()
    assert cancel.returncode == 0, cancel.stderr
    # backoff from 0.5 s doubling (full jitter): about 6 sends in 20 s, 30 at the very most
    assert 1 <= asked <= 30, asked
    assert stats["flex_429"] == stats["flex_requests"] and stats["requests_billed"] == 0
    assert "flex processing capacity is temporarily exhausted" in stderr  # the retrying line
    assert running.returncode == 4, stderr
    assert outcome_line(stderr).startswith("stopped: cancelled with `maple cancel`")
