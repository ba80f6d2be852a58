"""Turnaround by batch size from the batch history, the shard size a deadline needs, and the
expected finish (ETA) of a job's outstanding shards."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.model import BatchState, ShardInfo, Submission
from maple_engine.plan.turnaround import (
    MAX_SHARDS,
    MIN_BATCHES,
    TurnaroundFit,
    choose_size,
    finish_s,
    fit_turnaround,
    history_fit,
)
from maple_engine.state import JobState, ShardSummary
from maple_engine.storage.storage import Storage
from maple_engine.submit.eta import COLLECT_P90_S, COLLECT_S, Outstanding, finish_at, outstanding

NOW = datetime.now(UTC)
LINE = TurnaroundFit("p", "m", a=2.0, b=0.004, a90=3.0, batches=10)  # 2 s + 4 s per 1,000


def history(sizes: list[int], seconds: list[float], provider: str = "p") -> pl.DataFrame:
    created = [NOW - timedelta(hours=1, minutes=i) for i in range(len(sizes))]
    return pl.DataFrame(
        {
            "provider": [provider] * len(sizes),
            "model": ["m"] * len(sizes),
            "status": ["completed"] * len(sizes),
            "requests": sizes,
            "prompt_tokens": [n * 50 for n in sizes],
            "created_at": created,
            "duration_s": seconds,
        }
    )


def test_the_fit_recovers_the_line_and_shrugs_off_a_stalled_batch() -> None:
    sizes = [100, 500, 1000, 2000, 3000, 100, 1000, 3000]
    seconds = [2 + 0.004 * n for n in sizes]
    seconds[3] = 500.0  # one stalled batch
    fit = fit_turnaround(history(sizes, seconds), "p", "m")
    assert fit is not None
    assert fit.b == pytest.approx(0.004, rel=0.01) and fit.a == pytest.approx(2.0, abs=0.05)
    assert fit.seconds(1000, 0.9) >= fit.seconds(1000) and fit.tokens_per_request == 50
    assert fit_turnaround(history(sizes[:2], seconds[:2]), "p", "m") is None  # too few
    assert fit_turnaround(history(sizes, seconds), "other", "m") is None


def test_one_size_only_says_nothing_of_size() -> None:
    fit = fit_turnaround(history([1000] * 5, [10, 11, 12, 10, 11]), "p", "m")
    assert fit is not None and fit.b == 0 and fit.a == 11


def test_full_batches_are_kept_when_they_meet_the_target() -> None:
    choice = choose_size(3000, LINE, 60, 50_000)
    assert (choice.size, choice.shards) == (3000, 1)
    assert choice.p90_s == pytest.approx(15) and "full batches" in choice.reason
    assert choose_size(3000, LINE, None, 50_000).size == 3000


def test_smaller_batches_when_the_target_needs_them() -> None:
    choice = choose_size(3000, LINE, 8, 50_000)  # full: 3 + 12 = 15 s > 8 s
    assert choice.size < 3000 and choice.p90_s is not None and choice.p90_s <= 8
    assert choose_size(3000, LINE, 8, 50_000, in_flight=1000).size <= 1000
    assert "past the target" in choice.reason and "1,000 requests" in choice.reason
    # the largest size that meets it: one more request per batch would miss
    assert finish_s(LINE, 3000, choice.size, None, 0.9) <= 8


def test_a_target_nothing_meets_takes_the_fastest_and_says_so() -> None:
    choice = choose_size(3000, LINE, 1, 50_000)
    assert "still misses it" in choice.reason
    assert choice.shards == MAX_SHARDS  # no more shards than that, however small they get
    fastest = min(finish_s(LINE, 3000, s, None, 0.9) for s in range(15, 3001))
    assert choice.p90_s == pytest.approx(fastest)


def test_no_history_keeps_the_default_and_says_so() -> None:
    choice = choose_size(120_000, None, 60, 50_000)
    assert (choice.size, choice.shards, choice.p90_s) == (50_000, 3, None)
    assert "no batch history" in choice.reason


@given(
    rows=st.integers(1, 200_000),
    target=st.floats(1, 10_000),
    limit=st.integers(1, 50_000),
    in_flight=st.one_of(st.none(), st.integers(1, 500_000)),
)
def test_a_choice_stays_within_the_limits(
    rows: int, target: float, limit: int, in_flight: int | None
) -> None:
    choice = choose_size(rows, LINE, target, limit, in_flight=in_flight, min_requests=1)
    assert 1 <= choice.size <= limit and choice.shards * choice.size >= rows


def test_the_fit_is_read_from_the_ledger(tmp_path: Path) -> None:
    with CostLedger(database_url=f"sqlite:///{tmp_path}/l.sqlite") as ledger:
        polled = []
        for i, size in enumerate([100, 1000, 2000] * 2):
            created = NOW - timedelta(hours=1)
            end = created + timedelta(seconds=2 + 0.004 * size)
            times = (("created", created.timestamp()), ("ended", end.timestamp()))
            at = created.isoformat()
            sub = Submission("p", "job", f"s{i}", 1, f"b{i}", size, "h", at)
            polled.append((sub, BatchState(f"b{i}", "completed", True, times=times)))
        ledger.record_batches(BatchLabels("m", "t"), polled[: MIN_BATCHES - 1])
        assert history_fit(ledger, "p", "m") is None
        ledger.record_batches(BatchLabels("m", "t"), polled)
        fit = history_fit(ledger, "p", "m")
        assert fit is not None and fit.b == pytest.approx(0.004, rel=0.01)


def test_the_eta_counts_batches_in_flight_and_queued_ones() -> None:
    now = NOW.timestamp()
    flying = [Outstanding(1000, now - 4), Outstanding(1000, now - 1)]
    assert finish_at(flying, LINE, 0.5, now) == pytest.approx(now + 5 + COLLECT_S)
    assert finish_at(flying, LINE, 0.9, now) == pytest.approx(now + 6 + COLLECT_P90_S)
    late = [Outstanding(1000, now - 100)]  # older than its p90: ends within the spread
    assert finish_at(late, LINE, 0.9, now) == pytest.approx(now + 1 + COLLECT_P90_S)
    queued = [Outstanding(500, None)] * 4
    assert finish_at(queued, LINE, 0.5, now) == pytest.approx(now + 4 + COLLECT_S)
    # two at a time under a 1,000-request queue: two waves
    assert finish_at(queued, LINE, 0.5, now, in_flight=1000) == pytest.approx(now + 8 + COLLECT_S)


def test_a_shard_to_send_counts_the_rows_of_its_plan(tmp_path: Path) -> None:
    state = JobState(Storage(str(tmp_path)), "job")
    state.write_manifest([ShardInfo("s0", 100, 1000, 0, 99), ShardInfo("s1", 100, 1000, 100, 199)])
    ids = pl.DataFrame({"_maple_row_id": [3, 7, 9], "_maple_custom_id": ["a", "b", "c"]})
    state.write_plan("s0", 2, ids)  # 3 rows go again in attempt 2
    state.write_summary("s0", ShardSummary(attempt=1, pending_retry=3, final=False))
    assert state.plan_rows("s0", 2) == 3
    assert state.plan_rows("s1", 1) is None
    assert outstanding(state) == [Outstanding(3, None), Outstanding(100, None)]
