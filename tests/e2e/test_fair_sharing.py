"""Two jobs of two teams on one provider queue, from two ``maple enrich`` processes at once:
with weights 1:1 both progress, neither finishing its first half before the other starts."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.schema import queue_slots
from resources.costs import CostTracker

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
ROWS = 90
SHARD_ROWS = 15  # 6 shards per job
SHARD_TOKENS = 480  # about 32 prompt tokens a row: the limit holds two shards, not three


def start(url: str, tmp_path: Path, job: str, team: str, source: Path) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"MAPLE_COST_DB", "MAPLE_PRICES"}}
    args = [
        "enrich", str(source), "--prompt", "Brand and size: {title} / {description}",
        "--model", "gpt-4o-mini", "--provider", "emulator", "--team", team, "--job", job,
        "--storage", str(tmp_path / "store"), "--output", str(tmp_path / f"{job}.parquet"),
        "--poll-interval", "0.2", "--quiet", "--max-requests-per-batch", str(SHARD_ROWS),
        "--max-enqueued-tokens", str(2 * SHARD_TOKENS + SHARD_TOKENS // 2),
    ]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "maple_assets.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **clean,
            "MAPLE_EMULATOR_URL": url,
            "MAPLE_TEAM_WEIGHTS": "red=1,blue=1",
            # one storage root and ledger, but each its own Dagster instance: two processes
            # creating one SQLite instance at the same moment race in its schema migration
            "DAGSTER_HOME": str(tmp_path / f"dagster_{job}"),
        },
    )


@pytest.mark.slow  # two Dagster processes, six waves of two batches: about 40 s
def test_two_teams_share_the_queue(tmp_path: Path) -> None:
    table = pl.read_csv(CATALOG, infer_schema=False)
    sources = {}
    for job, part in (("red_job", table.head(ROWS)), ("blue_job", table.tail(ROWS))):
        sources[job] = tmp_path / f"{job}.csv"
        part.write_csv(sources[job])
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as server:
        runs = {
            job: start(server.url, tmp_path, job, job.split("_")[0], source)
            for job, source in sources.items()
        }
        for job, run in runs.items():
            out, err = run.communicate(timeout=300)
            assert run.returncode == 0, f"{job}: {err}{out}"
        stats = server.stats()
    assert stats["bodies_billed_twice"] == 0
    for job in runs:
        done = pl.read_parquet(tmp_path / f"{job}.parquet")
        assert done["llm_status"].to_list() == ["succeeded"] * ROWS
    with CostTracker(storage_root=str(tmp_path / "store")) as costs, costs.transaction() as conn:
        t = queue_slots.c
        rows = conn.execute(sa.select(t.job, t.enqueued_at, t.released_at)).all()
    started = {job: min(r.enqueued_at for r in rows if r.job == job) for job in runs}
    for job, other in (("red_job", "blue_job"), ("blue_job", "red_job")):
        released = sorted(r.released_at for r in rows if r.job == job)
        half_done = released[len(released) // 2 - 1]
        assert started[other] < half_done, f"{job} finished its first half before {other} began"
