"""The batch history: one row per provider batch, each phase's first time, the end kept."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from maple_engine.ledger.batch_history import (
    BatchLabels,
    HistoryFilter,
    history_rows,
    phase,
    upsert,
)
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.schema import batch_history
from maple_engine.model import BatchState, Submission

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def sub(batch_id: str, job: str = "rye", provider: str = "p", requests: int = 100) -> Submission:
    return Submission(provider, job, "s00000", 1, batch_id, requests, "h", T0.isoformat())


def state(batch_id: str, status: str, ended: bool = False, **kw: object) -> BatchState:
    return BatchState(batch_id, status, ended, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "ended", "expected"),
    [
        ("validating", False, "validating"),
        ("BATCH_STATE_PENDING", False, "validating"),
        ("Scheduled", False, "validating"),
        ("in_progress", False, "in_progress"),
        ("InProgress", False, "in_progress"),
        ("finalizing", False, "finalizing"),
        ("completed", True, "completed"),
        ("ended", True, "completed"),
        ("BATCH_STATE_SUCCEEDED", True, "completed"),
        ("expired", True, "expired"),
        ("Stopped", True, "cancelled"),
        ("cancelled", True, "cancelled"),
        ("BATCH_STATE_FAILED", True, "failed"),
    ],
)
def test_each_providers_status_is_a_phase(status: str, ended: bool, expected: str) -> None:
    assert phase(state("b", status, ended)) == expected


def test_polls_keep_each_phases_first_time_and_the_end(tmp_path: Path) -> None:
    labels = BatchLabels("gpt-4o-mini", "catalog", 1)
    polls = [
        (T0 + timedelta(minutes=1), "validating", False),
        (T0 + timedelta(minutes=5), "in_progress", False),
        (T0 + timedelta(minutes=9), "in_progress", False),
        (T0 + timedelta(minutes=20), "completed", True),
        (T0 + timedelta(minutes=30), "completed", True),  # polled again later: end kept
    ]
    with CostLedger(database_url=f"sqlite:///{tmp_path}/l.sqlite") as ledger:
        for at, status, ended in polls:
            rows = history_rows(labels, [(sub("b1"), state("b1", status, ended))], now=at)
            with ledger.transaction() as conn:
                upsert(conn, batch_history, rows)
        frame = ledger.batch_history()
    [row] = frame.to_dicts()
    assert row["status"] == "completed"
    assert row["validating_at"] == T0 + timedelta(minutes=1)
    assert row["in_progress_at"] == T0 + timedelta(minutes=5)
    assert row["finalizing_at"] is None
    assert row["ended_at"] == T0 + timedelta(minutes=20)
    assert row["duration_s"] == 20 * 60
    assert row["tasks_per_s"] == pytest.approx(100 / 1200)
    assert (row["team"], row["model"], row["version"], row["attempt"]) == (
        "catalog",
        "gpt-4o-mini",
        1,
        1,
    )


def test_the_providers_own_times_win_and_filters_apply(tmp_path: Path) -> None:
    stamps = (("created", T0.timestamp()), ("ended", (T0 + timedelta(hours=3)).timestamp()))
    with CostLedger(database_url=f"sqlite:///{tmp_path}/l.sqlite") as ledger:
        ledger.record_batches(
            BatchLabels("m", "search"),
            [
                (sub("b1"), state("b1", "ended", True, times=stamps, total=40)),
                (sub("b2", job="wheat", provider="q"), state("b2", "in_progress")),
            ],
        )
        every = ledger.batch_history()
        assert every["batch_id"].to_list() == ["b1", "b2"]
        [b1] = ledger.batch_history(HistoryFilter(provider="p")).to_dicts()
        assert b1["duration_s"] == 3 * 3600 and b1["requests"] == 40
        [b2] = ledger.batch_history(HistoryFilter(job="wheat")).to_dicts()
        assert b2["ended_at"] is None and b2["duration_s"] is None
        assert ledger.batch_history(HistoryFilter(team="catalog")).height == 0
        assert ledger.batch_history(HistoryFilter(since=date(2099, 1, 1))).height == 0


def test_an_empty_ledger_reads_as_an_empty_history(tmp_path: Path) -> None:
    ledger = CostLedger(storage_root=str(tmp_path / "nothing"))
    frame = ledger.batch_history()
    assert frame.height == 0 and "tasks_per_s" in frame.columns
    assert not (tmp_path / "nothing").exists()
