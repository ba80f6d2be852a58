"""Who holds a share of a real-time rate limit, kept in the deployment's database.

Every real-time sender of one provider account and model (the limit's ``scope``:
``provider/account digest/model``) keeps a row of ``rate_holders`` and renews its ``beat_at``
every ``BEAT_S``; it paces to its share of the limit among the scope's rows beaten less than
``WINDOW_S`` ago (1/N, or a whole number of each window's requests: ``Pacer.request_share``).
A new sender waits to send until every live one has beaten since it came (``uncounted``): they
count it by then, and have slowed down to make room. ``beat_at`` is the database's clock
(PostgreSQL's ``now()``, SQLite's ``julianday('now')``), seconds since the epoch: one clock for
every host, so a host whose own clock is off neither lingers in the count nor drops out of it.
A sender that finishes deletes its row (the others speed up at their next beat); one that dies
stops beating and drops out of the count after ``WINDOW_S``; its row is tidied away by any beat
``TIDY_S`` later.

Operators see the holders with::

    SELECT scope, host, pid, sender, now() - to_timestamp(beat_at) AS silent
    FROM rate_holders ORDER BY scope, host;
"""

import dataclasses
import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

BEAT_S = 0.5  # how often a sender renews its row and counts the others
WINDOW_S = 3.0  # a row not renewed for this long no longer counts (a dead sender's share)
TIDY_S = 60.0  # ... and is deleted by anyone's beat after this long


def holders_table(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "rate_holders",
        md,
        sa.Column("scope", sa.String(255), primary_key=True),  # provider/account/model
        sa.Column("sender", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("since", sa.Double, nullable=False),  # epoch s, the database's clock
        sa.Column("beat_at", sa.Double, nullable=False),
        sa.Index("ix_rate_holders_beat_at", "beat_at"),
    )


rate_holders = holders_table(sa.MetaData())  # schema.metadata holds a copy


def database_now(conn: sa.Connection) -> float:
    """Seconds since the epoch on the database's clock."""
    if conn.dialect.name == "postgresql":
        expr: Any = sa.cast(sa.func.extract("epoch", sa.func.now()), sa.Double)
    else:
        expr = (sa.func.julianday("now") - 2440587.5) * 86400.0
    return float(conn.execute(sa.select(expr)).scalar_one())


@dataclasses.dataclass(frozen=True)
class Holder:
    """One sender's row, as operators see it."""

    scope: str
    sender: str
    host: str
    pid: int
    held_s: float  # since it first beat
    silent_s: float  # since its last beat

    @property
    def live(self) -> bool:
        return self.silent_s < WINDOW_S


def holders(conn: sa.Connection) -> list[Holder]:
    """Every row of the table, oldest scope first; ``live`` tells which still count."""
    now, t = database_now(conn), rate_holders.c
    query = sa.select(rate_holders).order_by(t.scope, t.host, t.sender)
    return [
        Holder(r.scope, r.sender, r.host, r.pid, now - r.since, now - r.beat_at)
        for r in conn.execute(query)
    ]


def beat(conn: sa.Connection, scope: str, sender: str, host: str) -> set[str]:
    """Renew ``sender``'s row of ``scope`` (made at its first beat) and tidy long-dead rows;
    the scope's live senders."""
    now, t = database_now(conn), rate_holders.c
    row = {"scope": scope, "sender": sender, "host": host, "pid": os.getpid(),
           "since": now, "beat_at": now}  # fmt: skip
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(rate_holders).values(row)
    conn.execute(
        stmt.on_conflict_do_update(index_elements=[t.scope, t.sender], set_={"beat_at": now})
    )
    live = sa.select(t.sender).where(t.scope == scope, t.beat_at > now - WINDOW_S)
    senders = set(conn.execute(live).scalars())
    conn.execute(sa.delete(rate_holders).where(t.beat_at < now - TIDY_S))
    return senders


def uncounted(conn: sa.Connection, scope: str, sender: str) -> int:
    """The live senders of ``scope`` that have not beaten since ``sender``'s first beat (they
    have not counted it yet)."""
    t = rate_holders.c
    since = sa.select(t.since).where(t.scope == scope, t.sender == sender).scalar_subquery()
    live = t.beat_at > database_now(conn) - WINDOW_S
    query = sa.select(sa.func.count()).where(
        t.scope == scope, t.sender != sender, live, t.beat_at <= since
    )
    return int(conn.execute(query).scalar_one())


def leave(conn: sa.Connection, scope: str, sender: str) -> None:
    t = rate_holders.c
    conn.execute(sa.delete(rate_holders).where(t.scope == scope, t.sender == sender))
