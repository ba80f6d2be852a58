"""``maple enrich --provider gemini`` killed with SIGKILL right after a batch create, then
rerun: same output as an uninterrupted run (faults on), no request billed twice, and the batch
created just before the kill adopted from its ``displayName`` labels, not created again."""

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 16
POINTS = ("after_create",)  # the provider-specific one: adopt the orphan batch


def emulator() -> EmulatorServer:
    faults = {"rate_limited": 0.3, "expired": 0.3}
    return EmulatorServer(EmulatorConfig(seed=5, batch_seconds=0.2, fail=faults, control_fail=0))


def run_job(
    work: Path, server: EmulatorServer, crash: str | None
) -> subprocess.CompletedProcess[str]:
    table = work / "items.parquet"
    if not table.exists():
        pl.DataFrame(
            {
                "sku": [f"S{i:03d}" for i in range(ROWS)],
                "title": [f"thing {i}" for i in range(ROWS)],
            }
        ).write_parquet(table)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAPLE_CRASH")}
    env |= {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "test-key"}
    if crash:
        env["MAPLE_CRASH_AT"] = crash
    cmd = [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", "gemini-2.5-flash",
        "--provider", "gemini", "--storage", str(work / "store"), "--job", "crash",
        "--output", str(work / "out.parquet"), "--max-requests-per-batch", "8",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=240, check=False,
        start_new_session=True,
    )  # fmt: skip


def one(work: Path, crash: str | None) -> dict[str, Any]:
    work.mkdir()
    with emulator() as server:
        crashed = run_job(work, server, crash) if crash else None
        done = run_job(work, server, None)
        stats = server.stats()
    frame = (
        pl.read_parquet(work / "out.parquet").drop("llm_batch_id") if done.returncode == 0 else None
    )
    return {"crashed": crashed, "done": done, "stats": stats, "frame": frame}


def test_kill_then_rerun_pays_nothing_twice(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {p: pool.submit(one, tmp_path / (p or "base"), p) for p in (None, *POINTS)}
        got = {p: f.result() for p, f in futures.items()}
    base = got.pop(None)
    assert base["done"].returncode == 0, base["done"].stderr[-2000:]
    assert base["frame"]["llm_status"].to_list() == ["succeeded"] * ROWS
    assert base["frame"]["llm_attempts"].max() > 1  # faults did happen
    for point, outcome in got.items():
        assert outcome["crashed"].returncode == -signal.SIGKILL, (point, outcome["crashed"].stderr)
        assert outcome["done"].returncode == 0, (point, outcome["done"].stderr[-2000:])
        assert_frame_equal(outcome["frame"], base["frame"])
        stats = outcome["stats"]
        assert stats["bodies_billed_twice"] == 0, point
        assert stats["requests_billed"] == base["stats"]["requests_billed"], point
        assert stats["batches_created"] == base["stats"]["batches_created"], point


pytestmark = pytest.mark.slow
