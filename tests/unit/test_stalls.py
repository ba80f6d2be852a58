"""Stalled batches: older than the provider and model's turnaround percentile, once the
history holds enough completed batches."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.model import BatchState, Submission
from maple_engine.plan.turnaround import TurnaroundFit
from maple_engine.submit.stalls import MIN_COMPLETED, stalled, turnaround_limit

NOW = datetime.now(UTC)


def sub(batch_id: str, minutes_ago: float, provider: str = "p") -> Submission:
    at = (NOW - timedelta(minutes=minutes_ago)).isoformat()
    return Submission(provider, "job", batch_id, 1, batch_id, 10, "h", at)


def record(ledger: CostLedger, minutes: list[float], model: str = "m") -> None:
    polled = []
    for i, length in enumerate(minutes):
        created = NOW - timedelta(hours=2)
        times = (("created", created.timestamp()),)
        times += (("ended", (created + timedelta(minutes=length)).timestamp()),)
        polled.append(
            (sub(f"{model}{i}", 120), BatchState(f"{model}{i}", "ended", True, times=times))
        )
    ledger.record_batches(BatchLabels(model, "t"), polled)


def test_the_limit_needs_enough_completed_batches(tmp_path: Path) -> None:
    with CostLedger(database_url=f"sqlite:///{tmp_path}/l.sqlite") as ledger:
        record(ledger, [10.0] * (MIN_COMPLETED - 1))
        assert turnaround_limit(ledger, "p", "m", 95) is None
        record(ledger, [10.0] * (MIN_COMPLETED - 1) + [30.0, 50.0])
        limit = turnaround_limit(ledger, "p", "m", 95)
        assert limit is not None and 30 * 60 < limit <= 50 * 60
        assert turnaround_limit(ledger, "p", "other-model", 95) is None
        assert turnaround_limit(ledger, "q", "m", 95) is None


def test_only_batches_older_than_the_limit_stall() -> None:
    subs = [sub("young", 5), sub("old", 60), sub("rt-x", 90)]  # rt-: already real-time
    found = stalled(subs, 30 * 60, 95, now=NOW.timestamp())
    assert [s.submission.batch_id for s in found] == ["old"]
    assert found[0].age_s == 3600 and "in flight 60m, p95 turnaround 30m" in found[0].describe()
    assert stalled(subs, None, 95) == []


def test_a_batch_larger_than_the_history_gets_the_time_its_size_needs() -> None:
    fit = TurnaroundFit("p", "m", a=60, b=0.18, a90=90, batches=10, typical_requests=100)
    big = Submission(
        "p", "job", "big", 1, "big", 10_100, "h", (NOW - timedelta(minutes=30)).isoformat()
    )
    assert [s.submission.batch_id for s in stalled([big], 10 * 60, 95, now=NOW.timestamp())] == [
        "big"
    ]  # size-blind: 30 minutes is past a 10-minute p95
    assert stalled([big], 10 * 60, 95, now=NOW.timestamp(), fit=fit) == []  # 10 + 30 min
    later = NOW.timestamp() + 3600
    (stall,) = stalled([big], 10 * 60, 95, now=later, fit=fit)
    assert stall.limit_s == pytest.approx(10 * 60 + 1800)
