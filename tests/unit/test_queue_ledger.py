"""The shared queue budget (`maple_engine.ledger.queues`) on a real SQLite ledger, and the
parsers
of the queue limit and deadline options."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from maple_engine.durations import parse_duration
from maple_engine.errors import ConfigError
from maple_engine.ledger.queues import (
    UNSENT_TTL,
    Decision,
    Slot,
    admit_slot,
    holders,
    mark,
    mark_sent,
    release_others,
    release_slot,
)
from maple_engine.ledger.schema import queue_slots
from maple_engine.send.deadline_lanes import margin
from maple_engine.submit.queue import parse_limit
from resources.costs import CostTracker

QUEUE = "openai:gpt-4o-mini"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[CostTracker]:
    with CostTracker(storage_root=str(tmp_path)) as costs:
        yield costs


def ask(
    ledger: CostTracker,
    job: str,
    shard: str,
    units: int,
    limit: int | None = 100,
    *,
    team: str = "a",
    weight: float = 1.0,
    priority: int = 0,
    dead: frozenset[str] = frozenset(),
) -> Decision:
    slot = Slot(job, shard, 1, QUEUE, team, weight, priority, units)
    with ledger.transaction() as conn:
        return admit_slot(conn, queue_slots, slot, limit, dead=dead)


def release(ledger: CostTracker, job: str, shard: str) -> None:
    with ledger.transaction() as conn:
        mark(conn, queue_slots, [(job, shard, 1)], released=True)


def test_fills_the_queue_but_never_past_the_limit(ledger: CostTracker) -> None:
    assert ask(ledger, "j", "s1", 60).admitted
    again = ask(ledger, "j", "s1", 60)  # asking again (a rerun) is the same admission
    assert again.admitted and again.enqueued == 60
    full = ask(ledger, "j", "s2", 50)
    assert not full.admitted and "full" in full.reason and "limit 100" in full.reason
    assert ask(ledger, "j", "s3", 40).admitted  # fits exactly
    release(ledger, "j", "s1")
    assert ask(ledger, "j", "s2", 50).admitted


def test_equal_weights_take_turns(ledger: CostTracker) -> None:
    assert ask(ledger, "red", "r1", 50, team="red").admitted
    assert ask(ledger, "red", "r2", 50, team="red").admitted
    assert not ask(ledger, "blue", "b1", 50, team="blue").admitted  # full: blue waits
    release(ledger, "red", "r1")
    turn = ask(ledger, "red", "r3", 50, team="red")
    assert not turn.admitted and "fair share: team blue" in turn.reason
    assert ask(ledger, "blue", "b1", 50, team="blue").admitted


@pytest.mark.parametrize(("weight", "goes"), [(3.0, True), (1.0, False)])
def test_weights_split_the_queue(ledger: CostTracker, weight: float, goes: bool) -> None:
    assert ask(ledger, "small", "s1", 20, team="small").admitted
    assert ask(ledger, "big", "x1", 50, team="big", weight=weight).admitted
    assert not ask(ledger, "small", "s2", 40, team="small").admitted  # 110 > 100: waits
    # big holds 50 per weight 3 (16.7) < small's 20 per weight 1: big may take the room left
    assert ask(ledger, "big", "x2", 25, team="big", weight=weight).admitted is goes


def test_priority_within_a_team(ledger: CostTracker) -> None:
    assert ask(ledger, "j1", "s1", 100, team="t").admitted
    assert not ask(ledger, "urgent", "u1", 50, team="t", priority=5).admitted
    release(ledger, "j1", "s1")
    low = ask(ledger, "j1", "s2", 50, team="t")
    assert not low.admitted and "higher priority" in low.reason
    assert ask(ledger, "urgent", "u1", 50, team="t", priority=5).admitted


def test_unknown_limit_waits_for_validation(ledger: CostTracker) -> None:
    assert ask(ledger, "j", "s1", 10, limit=None).admitted
    wait = ask(ledger, "j", "s2", 10, limit=None)
    assert not wait.admitted and "not known yet" in wait.reason
    with ledger.transaction() as conn:
        mark(conn, queue_slots, [("j", "s1", 1)], released=False)  # passed validation
    assert ask(ledger, "j", "s2", 10, limit=None).admitted


def test_a_leftover_admission_stops_holding_the_queue(ledger: CostTracker) -> None:
    """Beta's submit run died after its slot was admitted, before any batch went out; its
    attempt is no longer pending (the shard moved on). Until beta's next tick releases it, the
    probe makes alpha wait for a validation that will never come."""
    assert ask(ledger, "beta", "s1", 10, limit=None).admitted
    assert ask(ledger, "beta", "s2", 10, limit=10_000).admitted
    assert "not known yet" in ask(ledger, "alpha", "a1", 10, limit=None).reason
    with ledger.transaction() as conn:
        assert release_others(conn, queue_slots, "beta", {("s2", 1)}) == 1  # s2 is still out
        assert release_others(conn, queue_slots, "beta", {("s2", 1)}) == 0
    alpha = ask(ledger, "alpha", "a1", 10, limit=None, team="b")
    assert not alpha.admitted and "being sent by job(s) beta" in alpha.reason  # s2 unvalidated
    with ledger.transaction() as conn:
        release_others(conn, queue_slots, "beta", set())  # beta has nothing pending at all
    assert ask(ledger, "alpha", "a1", 10, limit=None).admitted


def test_parse_limit_from_openai_message() -> None:
    message = (
        "Enqueued token limit reached for gpt-4o in organization org-x. Limit: 90,000 enqueued "
        "tokens. Please try submitting your batch again later."
    )
    assert parse_limit(("other", message)) == 90_000
    assert parse_limit(("no number here",)) is None


def test_parse_duration() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("6h") == 6 * 3600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1.5d") == 1.5 * 86400
    for bad in ("6 hours", "", "h", "10", "0s", "-5m"):
        with pytest.raises(ConfigError, match="--deadline"):
            parse_duration(bad)
    assert margin(6) == 1.0 and margin(6 * 3600) == 1800.0 and margin(600) == 60.0


def test_what_a_gone_job_admitted_but_never_sent_holds_nothing(ledger: CostTracker) -> None:
    """Beta was admitted, then failed before creating its batch (or its driver was killed):
    alpha waits for beta while beta lives, and not a moment after it is known gone."""
    assert ask(ledger, "beta", "s1", 10, limit=None).admitted
    wait = ask(ledger, "alpha", "a1", 10, limit=None, team="b")
    assert not wait.admitted and "being sent by job(s) beta" in wait.reason
    assert ask(ledger, "alpha", "a1", 10, limit=None, team="b", dead=frozenset({"beta"})).admitted
    with ledger.transaction() as conn:
        assert set(holders(conn, queue_slots, QUEUE)) == {"alpha"}


def test_a_gone_jobs_sent_batch_keeps_its_room_but_nobody_waits_for_it(
    ledger: CostTracker,
) -> None:
    assert ask(ledger, "beta", "s1", 60, limit=None).admitted
    with ledger.transaction() as conn:
        mark_sent(conn, queue_slots, ("beta", "s1", 1))
    assert "sent by job(s) beta" in ask(ledger, "alpha", "a1", 10, limit=None, team="b").reason
    alpha = ask(ledger, "alpha", "a1", 10, limit=None, team="b", dead=frozenset({"beta"}))
    assert alpha.admitted and alpha.enqueued == 60  # its batch is at the provider: it counts


def test_an_admission_nobody_refreshed_expires(ledger: CostTracker) -> None:
    """A sensor-driven job whose process died: no driver lease to ask, its slot ages out."""
    assert ask(ledger, "beta", "s1", 10, limit=None).admitted
    with ledger.transaction() as conn:
        old = datetime.now(UTC).replace(tzinfo=None) - UNSENT_TTL - timedelta(seconds=1)
        conn.execute(queue_slots.update().values(seen_at=old))
    assert ask(ledger, "alpha", "a1", 10, limit=None, team="b").admitted


def test_a_failed_creation_releases_its_slot(ledger: CostTracker) -> None:
    assert ask(ledger, "beta", "s1", 10, limit=None).admitted
    with ledger.transaction() as conn:
        release_slot(conn, queue_slots, ("beta", "s1", 1))
    assert ask(ledger, "alpha", "a1", 10, limit=None, team="b").admitted


def test_a_gone_job_waiting_for_room_does_not_go_first(ledger: CostTracker) -> None:
    """Blue waited for room (its fair turn before red's), then its driver was killed: red
    goes as soon as blue is known gone, not when blue's wait ages out (``WAITER_TTL``)."""
    assert ask(ledger, "red", "r1", 50, team="red").admitted
    assert ask(ledger, "red", "r2", 50, team="red").admitted
    assert not ask(ledger, "blue", "b1", 50, team="blue").admitted  # full: blue waits
    with ledger.transaction() as conn:
        assert set(holders(conn, queue_slots, QUEUE)) == {"red", "blue"}
    release(ledger, "red", "r1")
    assert "fair share: team blue" in ask(ledger, "red", "r3", 50, team="red").reason
    assert ask(ledger, "red", "r3", 50, team="red", dead=frozenset({"blue"})).admitted
