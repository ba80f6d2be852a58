"""A provider queue budget shared by every job on one provider and model, kept in the ledger.

Each batch a job wants to send is a row of ``queue_slots`` keyed by (job, shard, attempt): it
waits (``enqueued_at`` null, ``seen_at`` refreshed by the job's sensor), is admitted into the
queue (``enqueued_at``), and is released when its batch ends (``released_at``). Admission is
one transaction, under the queue's advisory lock on PostgreSQL and the database write lock on
SQLite (``BEGIN IMMEDIATE``), like the budget admission (`maple_engine.ledger.admissions`), so
concurrent
jobs in any process never admit past the limit together.

Who goes next when several jobs wait: a job may only be admitted if (1) the batch fits under the
limit, (2) no waiting job of its own team has a higher priority, and (3) its team's enqueued
units per unit of weight are not above another waiting team's (weighted fair sharing; ties go
to the team waiting longest). With no limit known yet (``limit`` None) a batch is admitted only
when every admitted batch of the queue has passed the provider's validation, so at most one
batch fails while the limit is being learned.

An admission belongs to a live job. A batch admitted but not created yet holds room only while
its job lives: the caller names the jobs it knows are gone (``dead``: their driver's lease is
free), and their unsent slots are released at once, their sent but unvalidated batches no longer
hold the others back, and their waiting slots no longer go first by priority or fair share (a
waiting job not seen for ``WAITER_TTL`` no longer waits either); an unsent slot nobody
refreshed for ``UNSENT_TTL`` (a job driven by a sensor whose process died) is released too. A
job whose batch creation fails releases its slot itself (`release_slot`).
"""

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

WAITER_TTL = timedelta(seconds=120)  # a waiting job not seen for this long no longer waits
STALE_AFTER = timedelta(hours=25)  # an admitted batch is surely over after the 24 h window
UNSENT_TTL = timedelta(minutes=10)  # an admitted batch not created nor refreshed for this long


def queue_table(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "queue_slots",
        md,
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("queue", sa.String(255), nullable=False, index=True),  # provider:model
        sa.Column("team", sa.String(255), nullable=False),
        sa.Column("weight", sa.Double, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("units", sa.BigInteger, nullable=False),  # tokens (OpenAI) or requests
        sa.Column("waiting_since", sa.DateTime, nullable=False),  # naive UTC
        sa.Column("seen_at", sa.DateTime, nullable=False),
        sa.Column("enqueued_at", sa.DateTime, nullable=True),
        sa.Column("sent_at", sa.DateTime, nullable=True),  # the provider accepted the batch
        sa.Column("validated", sa.Boolean, nullable=False, default=False),
        sa.Column("released_at", sa.DateTime, nullable=True),
        sa.Column("root", sa.String(1024), nullable=True),  # the job's storage root
    )


@dataclasses.dataclass(frozen=True)
class Slot:
    """One batch asking for room in a queue."""

    job: str
    shard: str
    attempt: int
    queue: str
    team: str
    weight: float
    priority: int
    units: int
    root: str | None = None  # the job's storage root, where its driver's lease is


@dataclasses.dataclass(frozen=True)
class Decision:
    admitted: bool
    reason: str  # why it waits ("" when admitted)
    enqueued: int  # units admitted and not released in the queue (before this batch)
    enqueued_at: datetime | None = None
    validating: bool = False  # it waits only for batches to pass the provider's validation


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _lock(conn: sa.Connection, queue: str) -> None:
    if conn.dialect.name == "postgresql":
        digest = hashlib.sha256(f"maple-queue:{queue}".encode()).digest()[:8]
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(int.from_bytes(digest, signed=True))))


def _live(t: sa.Table, queue: str, now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(
        t.c.queue == queue,
        t.c.released_at.is_(None),
        t.c.enqueued_at.is_not(None),
        t.c.enqueued_at > now - STALE_AFTER,
    )


def _waiting(t: sa.Table, queue: str, now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(
        t.c.queue == queue,
        t.c.enqueued_at.is_(None),
        t.c.released_at.is_(None),
        t.c.seen_at > now - WAITER_TTL,
    )


def holders(conn: sa.Connection, t: sa.Table, queue: str) -> dict[str, set[str | None]]:
    """The jobs holding admitted batches in ``queue`` now or waiting for room, with the storage
    roots their slots name (None: a slot recorded before slots named one)."""
    now = _now()
    member = _live(t, queue, now) | _waiting(t, queue, now)
    live = sa.select(t.c.job, t.c.root).where(member).distinct()
    held: dict[str, set[str | None]] = {}
    for job, root in conn.execute(live):
        held.setdefault(job, set()).add(root)
    return held


def _release_orphans(conn: sa.Connection, t: sa.Table, queue: str, dead: frozenset[str]) -> None:
    """Release the admitted slots that reached no provider and whose job is gone."""
    now = _now()
    unsent = _live(t, queue, now) & t.c.sent_at.is_(None)
    gone = t.c.seen_at < now - UNSENT_TTL
    if dead:
        gone = gone | t.c.job.in_(sorted(dead))
    conn.execute(t.update().where(unsent, gone).values(released_at=now))


def admit_slot(
    conn: sa.Connection,
    t: sa.Table,
    slot: Slot,
    limit: int | None,
    proven: int = 0,
    *,
    dead: frozenset[str] = frozenset(),
) -> Decision:
    """Admit ``slot`` into its queue now, or record it as waiting and say why.

    ``proven``: with no limit known, units the queue is known to have held (batches validated
    together before): up to it, batches go out without waiting for validations. ``dead``: jobs
    known not to run any more (see the module's docstring)."""
    _lock(conn, slot.queue)
    _release_orphans(conn, t, slot.queue, dead)
    now = _now()
    key = (t.c.job == slot.job) & (t.c.shard == slot.shard) & (t.c.attempt == slot.attempt)
    row = conn.execute(sa.select(t.c.enqueued_at, t.c.released_at).where(key)).first()
    live = conn.execute(
        sa.select(t.c.job, t.c.team, t.c.units, t.c.validated, t.c.sent_at).where(
            _live(t, slot.queue, now)
        )
    )
    usage: dict[str, int] = {}
    unvalidated: dict[str, bool] = {}  # job -> has a batch at the provider
    for job, team, units, validated, sent_at in live:
        usage[team] = usage.get(team, 0) + int(units)
        if not validated and job not in dead:
            unvalidated[job] = unvalidated.get(job, False) or sent_at is not None
    enqueued = sum(usage.values())
    if row is not None and row.enqueued_at is not None:
        conn.execute(t.update().where(key).values(seen_at=now))
        return Decision(True, "", enqueued, row.enqueued_at)
    if row is None:
        values = dataclasses.asdict(slot) | {
            "waiting_since": now,
            "seen_at": now,
            "validated": False,
        }
        conn.execute(t.insert().values(**values))
    else:
        conn.execute(t.update().where(key).values(seen_at=now, units=slot.units))
    if limit is None and enqueued + slot.units <= proven:
        unvalidated = {}
    reason = _why_wait(
        conn, t, slot, limit=limit, usage=usage, unvalidated=unvalidated, now=now, dead=dead
    )
    if reason:
        return Decision(False, reason, enqueued, validating=limit is None and bool(unvalidated))
    conn.execute(t.update().where(key).values(enqueued_at=now, released_at=None))
    return Decision(True, "", enqueued, now)


def _why_wait(
    conn: sa.Connection,
    t: sa.Table,
    slot: Slot,
    *,
    limit: int | None,
    usage: dict[str, int],
    unvalidated: dict[str, bool],
    now: datetime,
    dead: frozenset[str],
) -> str:
    enqueued = sum(usage.values())
    if limit is None and unvalidated:
        jobs = sorted(unvalidated)
        sent = "sent" if any(unvalidated.values()) else "being sent"
        return (
            f"queue limit of {slot.queue} not known yet: waiting until the batch(es) {sent} by "
            f"job(s) {', '.join(jobs)} pass the provider's validation"
        )
    if limit is not None and enqueued + slot.units > limit:
        return f"queue {slot.queue} full: {enqueued:,} + {slot.units:,} > limit {limit:,}"
    waiting = conn.execute(
        sa.select(t.c.job, t.c.team, t.c.weight, t.c.priority, t.c.waiting_since).where(
            _waiting(t, slot.queue, now),
            t.c.job != slot.job,
            t.c.job.not_in(sorted(dead)),
        )
    ).all()
    mine = conn.execute(
        sa.select(sa.func.min(t.c.waiting_since)).where(
            t.c.job == slot.job, t.c.enqueued_at.is_(None), t.c.released_at.is_(None)
        )
    ).scalar_one()
    for other in waiting:
        if other.team == slot.team and other.priority > slot.priority:
            return f"job {other.job} of team {slot.team} has a higher priority ({other.priority})"
    share = usage.get(slot.team, 0) / slot.weight
    for other in waiting:
        if other.team == slot.team:
            continue
        theirs = usage.get(other.team, 0) / other.weight
        if theirs < share or (theirs == share and mine is not None and other.waiting_since < mine):
            return (
                f"fair share: team {other.team} (job {other.job}) goes first; team {slot.team} "
                f"has {usage.get(slot.team, 0):,} enqueued (weight {slot.weight:g}), team "
                f"{other.team} {usage.get(other.team, 0):,} (weight {other.weight:g})"
            )
    return ""


def mark(
    conn: sa.Connection, t: sa.Table, keys: list[tuple[str, str, int]], *, released: bool
) -> None:
    """Mark batches validated (``released=False``) or released (their batch ended)."""
    now = _now()
    for job, shard, attempt in keys:
        key = (t.c.job == job) & (t.c.shard == shard) & (t.c.attempt == attempt)
        values = {"released_at": now, "validated": True} if released else {"validated": True}
        condition = t.c.released_at.is_(None) if released else t.c.validated.is_(False)
        conn.execute(t.update().where(key, condition).values(**values))


def release_others(conn: sa.Connection, t: sa.Table, job: str, held: set[tuple[str, int]]) -> int:
    """Release the job's admitted batches other than ``held`` (shard, attempt): the attempts it
    still submits or waits for. An admitted slot outside them is a leftover (an attempt that
    ended unseen, a submit run that died, a stopped job) and must not hold the queue's room,
    nor, while a limit is being learned, keep every other job waiting for its validation."""
    rows = conn.execute(
        sa.select(t.c.shard, t.c.attempt).where(
            t.c.job == job, t.c.enqueued_at.is_not(None), t.c.released_at.is_(None)
        )
    ).all()
    stale = [(job, r.shard, r.attempt) for r in rows if (r.shard, r.attempt) not in held]
    mark(conn, t, stale, released=True)
    return len(stale)


def release_slot(conn: sa.Connection, t: sa.Table, key: tuple[str, str, int]) -> None:
    """The batch's creation failed: it holds no room and nobody waits for its validation."""
    mark(conn, t, [key], released=True)


def mark_sent(conn: sa.Connection, t: sa.Table, key: tuple[str, str, int]) -> None:
    job, shard, attempt = key
    where = (t.c.job == job) & (t.c.shard == shard) & (t.c.attempt == attempt)
    conn.execute(t.update().where(where).values(sent_at=_now()))


def refused(conn: sa.Connection, t: sa.Table, queue: str) -> int:
    """The provider refused a batch as queue-full: every admitted batch not sent yet waits
    again; returns the units of the batches sent and still out (a lower bound of the limit)."""
    _lock(conn, queue)
    now = _now()
    conn.execute(
        t.update()
        .where(_live(t, queue, now), t.c.sent_at.is_(None))
        .values(enqueued_at=None, seen_at=now)
    )
    total = sa.func.coalesce(sa.func.sum(t.c.units), 0)
    return int(conn.execute(sa.select(total).where(_live(t, queue, now))).scalar_one())


def validated_units(conn: sa.Connection, t: sa.Table, queue: str) -> int:
    """Units of the queue's batches out now that passed validation (the queue held them)."""
    live = _live(t, queue, _now()) & t.c.validated.is_(True)
    total = sa.func.coalesce(sa.func.sum(t.c.units), 0)
    return int(conn.execute(sa.select(total).where(live)).scalar_one())


def release_job(conn: sa.Connection, t: sa.Table, job: str) -> int:
    """The job was cancelled: its batches leave every queue now and it waits for nothing.
    Returns how many admitted batches were released."""
    now = _now()
    done = conn.execute(
        t.update()
        .where(t.c.job == job, t.c.enqueued_at.is_not(None), t.c.released_at.is_(None))
        .values(released_at=now)
    )
    forget_waiting(conn, t, job)
    return int(done.rowcount or 0)


def forget_waiting(conn: sa.Connection, t: sa.Table, job: str) -> None:
    """The job waits for nothing now (it finished, stopped, or went real-time)."""
    conn.execute(t.delete().where(t.c.job == job, t.c.enqueued_at.is_(None)))


def usage_by_queue(conn: sa.Connection, t: sa.Table) -> list[dict[str, object]]:
    """Per queue: units enqueued, batches enqueued, batches and jobs waiting."""
    now = _now()
    rows: dict[str, dict[str, object]] = {}
    live = t.c.released_at.is_(None) & (
        t.c.enqueued_at.is_(None) & (t.c.seen_at > now - WAITER_TTL)
        | t.c.enqueued_at.is_not(None) & (t.c.enqueued_at > now - STALE_AFTER)
    )
    for r in conn.execute(sa.select(t).where(live)):
        entry = rows.setdefault(
            r.queue, {"queue": r.queue, "enqueued": 0, "batches": 0, "waiting": 0, "jobs": set()}
        )
        if r.enqueued_at is not None:
            entry["enqueued"] = int(entry["enqueued"]) + int(r.units)  # type: ignore[call-overload]
            entry["batches"] = int(entry["batches"]) + 1  # type: ignore[call-overload]
        else:
            entry["waiting"] = int(entry["waiting"]) + 1  # type: ignore[call-overload]
        entry["jobs"].add(r.job)  # type: ignore[attr-defined]
    return [dict(e, jobs=sorted(e["jobs"])) for e in rows.values()]  # type: ignore[call-overload]
