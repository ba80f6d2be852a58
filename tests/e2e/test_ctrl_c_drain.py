"""A stop that waits for what it paid: Ctrl-C during a real-time job whose answers take a
second. The first Ctrl-C sends nothing more, waits for the requests in flight (saying how long
at most) and keeps their answers, then stops as interrupted (exit 130); the rerun sends only the
rows never answered, so no body is billed twice. A second Ctrl-C stops at once."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

ROWS = 300
AS_A_SHELL_STARTS_IT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'maple'; runpy.run_module('maple_assets.cli', run_name='__main__')"
)


def start(
    server: EmulatorServer, tmp_path: Path, *extra: str
) -> tuple[subprocess.Popen[str], list[str]]:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    args = [
        sys.executable, "-c", AS_A_SHELL_STARTS_IT, "enrich", str(table), "--prompt",
        "About {title}", "--model", "gpt-4o-mini", "--provider", "openai-realtime", "--storage",
        str(tmp_path / "store"), "--job", "drain", "--quiet", *extra,
    ]  # fmt: skip
    env = {**os.environ, "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-drain"}
    env.pop("MAPLE_COST_DB", None)
    process = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while server.stats()["realtime_requests"] < 40:  # well under way, many in flight
        assert time.monotonic() < deadline and process.poll() is None, "the job never sent"
        time.sleep(0.05)
    return process, args[3:]


@pytest.mark.slow  # ~20 s: a job of 1 s answers interrupted, then its rerun
@pytest.mark.parametrize("extra", [(), ("--debug",)], ids=["plain", "debug"])
def test_a_ctrl_c_keeps_the_answers_in_flight_and_the_rerun_pays_none_twice(
    tmp_path: Path, extra: tuple[str, ...]
) -> None:
    config = EmulatorConfig(batch_seconds=0, realtime_latency_s=(1.0, 1.0))
    with EmulatorServer(config) as server:
        process, args = start(server, tmp_path, *extra)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        stopped = server.stats()
        env = {**os.environ, "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-drain"}
        env.pop("MAPLE_COST_DB", None)
        rerun = subprocess.run(
            [sys.executable, "-m", "maple_assets.cli", *args], env=env, capture_output=True,
            text=True, check=False, timeout=300,
        )  # fmt: skip
        after = server.stats()
    assert process.returncode == 130, stderr
    said = "stopping: waiting up to 15 s for the requests in flight"
    assert stderr.startswith(said) if not extra else said in stderr, stderr
    assert stopped["requests_billed"] < ROWS
    assert rerun.returncode == 0, rerun.stderr
    assert after["bodies_billed_twice"] == 0, after  # every answer paid for was kept
    assert after["requests_billed"] == ROWS


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, realtime_latency_s=(5.0, 5.0))
    with EmulatorServer(config) as server:
        process, _ = start(server, tmp_path)
        process.send_signal(signal.SIGINT)
        time.sleep(2.5)  # Dagster loaded: while it loads, its own handler holds a Ctrl-C back
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    assert process.returncode == 130
    assert time.monotonic() - started < 4  # not the 5 s answers
