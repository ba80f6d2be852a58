"""A batch the job created disappears at the provider (404): after the provider's list confirms
it is gone, its rows (none billed) are sent again; it never blocks ``maple cancel`` or resume.

The emulator forgets every batch on ``POST /_emulator/reset``, which is how these tests lose
the job's batches (the counters restart too, so they count only what was sent afterwards)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS, PER_BATCH = 8, 4
MODELS = {"emulator": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}


def command(tmp_path: Path, provider: str = "emulator") -> list[str]:
    table = tmp_path / "items.parquet"
    if not table.exists():
        pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    return [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", MODELS[provider],
        "--provider", provider, "--storage", str(tmp_path / "store"), "--job", "lost",
        "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", str(PER_BATCH),
        "--poll-interval", "0.2", "--quiet",
    ]  # fmt: skip


def wait_for_batches(tmp_path: Path, proc: subprocess.Popen[str]) -> None:
    state = tmp_path / "store" / "lost" / "state"
    deadline = time.monotonic() + 120
    while len(list(state.glob("*/submission-1.json"))) < ROWS // PER_BATCH:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def forget_batches(server: EmulatorServer) -> None:
    httpx.post(f"{server.url}/_emulator/reset", timeout=10).raise_for_status()


def start(
    tmp_path: Path, server: EmulatorServer, provider: str = "emulator"
) -> subprocess.Popen[str]:
    env = {
        **os.environ, "MAPLE_EMULATOR_URL": server.url, "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "test-key",
    }  # fmt: skip
    return subprocess.Popen(
        command(tmp_path, provider), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["emulator", "anthropic"])
def test_lost_batches_are_confirmed_then_their_rows_resent(tmp_path: Path, provider: str) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=3.0)) as server:
        proc = start(tmp_path, server, provider)
        wait_for_batches(tmp_path, proc)
        forget_batches(server)
        _, err = proc.communicate(timeout=180)
        stats = server.stats()
    assert proc.returncode == 0, err[-3000:]
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    assert frame["llm_attempts"].to_list() == [2] * ROWS  # each row sent once more, once
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0, stats
    assert stats["batches_created"] == ROWS // PER_BATCH, stats


@pytest.mark.slow  # ~30 s end to end; the lost-batch resend stays in the default suite
def test_cancel_and_resume_a_job_whose_batches_are_gone(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=60.0)) as first:
        proc = start(tmp_path, first)
        wait_for_batches(tmp_path, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    # The provider comes back without the job's batches: a fresh emulator knows none of them.
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5)) as server:
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        cancel = subprocess.run(
            [MAPLE, "cancel", "lost", "--storage", str(tmp_path / "store")],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert cancel.returncode == 0, cancel.stderr
        resumed = subprocess.run(
            command(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False
        )
        stats = server.stats()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"succeeded      {ROWS}" in resumed.stdout
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0, stats
