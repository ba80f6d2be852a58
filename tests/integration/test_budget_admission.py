"""Budget admission in the ledger is atomic: concurrent processes admitting batches of one job
into one SQLite ledger never admit past the budget (the PostgreSQL flavour lives in
test_costs_postgres.py)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import sqlalchemy as sa

from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.schema import budget_admissions
from resources.costs import CostTracker

REPO = Path(__file__).parents[2]
BUDGET, ESTIMATE, WORKERS, TRIES = 1.0, 0.03, 4, 20  # 80 tries, room for 33
ADMITTER = textwrap.dedent(
    """
    import sys
    from resources.costs import CostTracker

    worker, url = sys.argv[1], sys.argv[2]
    with CostTracker(database_url=url) as tracker:
        for i in range(int(sys.argv[3])):
            tracker.admit(("job", f"{worker}-{i}", 1), float(sys.argv[4]), float(sys.argv[5]))
    """
)


def run_admitters(url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(TRIES), str(ESTIMATE), str(BUDGET)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", ADMITTER, str(w), url, *args],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err


def admitted(url: str) -> list[float]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = sa.select(budget_admissions.c.estimate_usd)
            return [float(v) for v in conn.execute(query).scalars()]
    finally:
        engine.dispose()


def test_concurrent_admissions_never_pass_the_budget_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/costs.sqlite"
    run_admitters(url)
    estimates = admitted(url)
    assert len(estimates) == int(BUDGET // ESTIMATE) == 33
    assert sum(estimates) <= BUDGET


def test_recorded_costs_replace_estimates_and_readmission_is_idempotent(tmp_path: Path) -> None:
    with CostTracker(database_url=f"sqlite:///{tmp_path}/c.sqlite") as tracker:
        first = tracker.admit(("job", "s1", 1), estimate_usd=0.6, budget_usd=1.0)
        assert first.admitted and first.committed_usd == 0.0
        assert not tracker.admit(("job", "s2", 1), estimate_usd=0.6, budget_usd=1.0).admitted
        assert tracker.admit(("job", "s1", 1), estimate_usd=0.6, budget_usd=1.0).admitted
        tracker.record(_cost("s1", 0.1))  # the batch cost less than its estimate
        second = tracker.admit(("job", "s2", 1), estimate_usd=0.6, budget_usd=1.0)
        assert second.admitted and abs(second.spent_usd - 0.1) < 1e-12
        assert second.in_flight_usd == 0.0
        assert tracker.admit(("other", "s1", 1), estimate_usd=0.9, budget_usd=1.0).admitted


def _cost(shard: str, usd: float) -> AttemptCost:
    return AttemptCost(
        job="job", team="t", model="m", provider="openai", mode="batch", shard=shard,
        attempt=1, batch_id="b", requests=1, input_tokens=1, cached_input_tokens=0,
        cache_write_tokens=0, output_tokens=1, cost_usd=usd, realtime_cost_usd=2 * usd,
    )  # fmt: skip
