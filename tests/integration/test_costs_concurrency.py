"""Several processes recording into one SQLite ledger at once lose nothing and corrupt nothing."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import sqlalchemy as sa

from maple_engine.ledger.schema import current_revision, head_revision
from resources.costs import CostTracker

REPO = Path(__file__).parents[2]
WRITER = textwrap.dedent(
    """
    import sys
    from resources.costs import CostTracker
    from maple_engine.ledger.attempt_cost import AttemptCost

    worker, url = sys.argv[1], sys.argv[2]
    with CostTracker(database_url=url) as tracker:
        for shard in range(100):
            tracker.record(AttemptCost(
                job=f"job-{worker}", team="t", model="m", provider="openai", mode="batch",
                shard=str(shard), attempt=0, batch_id=None, requests=3, input_tokens=30,
                cached_input_tokens=0, cache_write_tokens=0, output_tokens=3,
                cost_usd=0.001, realtime_cost_usd=0.002,
            ))
    """
)


def test_concurrent_processes_share_one_sqlite_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/costs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", WRITER, str(w), url],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    for w in writers:
        _, stderr = w.communicate(timeout=120)
        assert w.returncode == 0, stderr
    with CostTracker(database_url=url) as tracker:
        report = tracker.report(by="job")
        assert [r["requests"] for r in report] == [300] * 4
        assert all(abs(tracker.job_total(f"job-{w}") - 0.1) < 1e-9 for w in range(4))
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert current_revision(conn) == head_revision()
            versions = conn.exec_driver_sql("SELECT version_num FROM maple_ledger_version").all()
            assert len(versions) == 1
    finally:
        engine.dispose()
