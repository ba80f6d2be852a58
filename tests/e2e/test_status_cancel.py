"""``maple status`` and ``maple cancel`` as a user runs them, next to a running ``maple enrich``."""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_assets.cli.queues import queue_status
from maple_engine.ledger.schema import queue_slots
from maple_engine.storage.storage import Storage
from resources.costs import CostTracker
from tests.e2e.cli import maple

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 10


def enrich_args(table: Path, store: Path) -> list[str]:
    return [
        "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(store), "--job", "cat",
        "--output", str(store.parent / "out.parquet"), "--max-requests-per-batch", "5",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip


def status(store: Path, env: dict[str, str], *job: str) -> Any:
    """``maple status --format json`` (in-process: it only reads state files)."""
    args = ["status", *job, "--storage", str(store), "--format", "json"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def wait_for_batches(store: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(list(store.glob("cat/state/*/submission-1.json"))) < count:
        assert time.monotonic() < deadline, "the job never submitted its batches"
        time.sleep(0.2)


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_cancel_then_rerun_resumes_and_status_reports_each_step(tmp_path: Path) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_csv(table)
    store = tmp_path / "store"
    # slow batches: the job is still waiting on them when it is cancelled
    with EmulatorServer(EmulatorConfig(batch_seconds=20, control_fail=0)) as server:
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        running = subprocess.Popen(
            [MAPLE, *enrich_args(table, store)], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for_batches(store, 2)
        before = status(store, env, "cat")
        assert before["phase"] == "running" and before["unfinished"] == ROWS
        assert [s["state"] for s in before["shards"]] == ["in flight", "in flight"]

        cancelled = maple("cancel", "cat", "--storage", str(store), url=server.url, timeout=120)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelled 2 batch(es)" in cancelled.stdout
        _, err = running.communicate(timeout=90)  # collects the cancelled batches, then stops
        assert running.returncode == 4, err  # stopped early: cancelled
        assert "stopped: cancelled with `maple cancel`" in err

        after = status(store, env, "cat")
        assert after["stopped"].startswith("cancelled")
        assert after["succeeded"] + after["failed"] == ROWS
        assert set(after["failed_by_class"]) == {"expired"}  # the rows the batches never ran
        assert all(s["state"] == "stopped" for s in after["shards"])

        server.config.batch_seconds = 0.2  # the rerun's batches finish quickly
        resumed = maple(*enrich_args(table, store), url=server.url, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming job cat" in resumed.stderr
        stats = server.stats()
    final = status(store, env, "cat")
    assert final["phase"] == "merged" and final["stopped"] is None
    assert final["succeeded"] == ROWS and final["failed"] == 0 and final["cost_usd"] > 0
    assert [s["attempts"] for s in final["shards"]] == [2, 2]
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == ROWS

    listing = status(store, env)
    assert [job["job"] for job in listing] == ["cat"]
    table_view = maple("status", "cat", "--storage", str(store), url=server.url, timeout=120)
    assert "s00001" in table_view.stdout and "merged" in table_view.stdout


def test_status_of_an_unknown_job_says_how_to_find_jobs(tmp_path: Path) -> None:
    result = maple("status", "nope", "--storage", str(tmp_path), timeout=120)
    assert result.returncode == 2
    assert "maple status" in result.stderr and "nope" in result.stderr


@pytest.mark.slow  # a driver started and killed: about 20 s
def test_cancel_of_a_dead_job_gives_its_queue_share_back(tmp_path: Path) -> None:
    """A driver killed with its batches admitted to the provider queue budget holds their slots
    until its batches are seen ending; ``maple cancel`` releases them at once, so other jobs on
    that provider and model need not wait for a job nobody runs any more."""
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_csv(table)
    store = tmp_path / "store"
    with EmulatorServer(EmulatorConfig(batch_seconds=60, control_fail=0)) as server:
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        args = [*enrich_args(table, store), "--max-enqueued-tokens", "1000000"]
        running = subprocess.Popen(
            [MAPLE, *args], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for_batches(store, 2)
        running.kill()  # the driver dies; its two batches stay admitted in the ledger
        running.communicate(timeout=30)
        assert held(store) == 2
        cancelled = maple("cancel", "cat", "--storage", str(store), url=server.url, timeout=120)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelled 2 batch(es)" in cancelled.stdout
        assert "released 2 batch(es) from the provider queue budget" in cancelled.stdout
        assert held(store) == 0
        queues = queue_status(Storage(str(store)))
        assert all(q["enqueued"] == 0 and "cat" not in q["jobs"] for q in queues), queues


def held(store: Path) -> int:
    """Batches of job ``cat`` admitted to a queue and not released, from the ledger."""
    with CostTracker(storage_root=str(store)) as costs, costs.transaction() as conn:
        t = queue_slots.c
        live = t.enqueued_at.is_not(None) & t.released_at.is_(None) & (t.job == "cat")
        return int(conn.execute(sa.select(sa.func.count()).where(live)).scalar_one())


@pytest.mark.slow  # ~10 s: a running job cancelled twice
def test_cancel_without_the_jobs_team_map_cancels_nothing_and_says_so(tmp_path: Path) -> None:
    """A job ran on its team's OpenAI project; ``maple cancel`` from a shell without the team
    attribution map cannot see its batch: one line naming the batch and the fix, exit 2, the
    job not stopped; with the map, the batch is cancelled."""
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_csv(table)
    store = tmp_path / "store"
    teams = tmp_path / "teams.json"
    teams.write_bytes(orjson.dumps({"teams": {"catalog": {"openai_project": "proj_catalog"}}}))
    with EmulatorServer(EmulatorConfig(batch_seconds=30, control_fail=0)) as server:
        keys = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-team"}
        mapped = {**keys, "MAPLE_TEAM_ATTRIBUTION": str(teams)}
        args = [MAPLE, "enrich", str(table), "--prompt", "About {title}", "--model",
                "gpt-4o-mini", "--provider", "openai", "--team", "catalog", "--storage",
                str(store), "--job", "cat", "--poll-interval", "0.1", "--quiet"]  # fmt: skip
        running = subprocess.Popen(
            args, env={**os.environ, **mapped}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for_batches(store, 1)
        blind = maple("cancel", "cat", "--storage", str(store), clean=True, **keys)
        assert running.poll() is None  # the job runs on
        seen = maple("cancel", "cat", "--storage", str(store), clean=True, **mapped)
        _, err = running.communicate(timeout=90)
    assert blind.returncode == 2, blind.stdout + blind.stderr
    assert blind.stderr.strip().splitlines() == [blind.stderr.strip()]
    assert "does not know batch batch_" in blind.stderr
    assert (
        "the job ran for team 'catalog', which this shell's MAPLE_TEAM_ATTRIBUTION" in blind.stderr
    )
    assert "nothing was cancelled and the job was not stopped" in blind.stderr
    assert seen.returncode == 0, seen.stderr
    assert "cancelled 1 batch(es)" in seen.stdout
    assert running.returncode == 4, err
