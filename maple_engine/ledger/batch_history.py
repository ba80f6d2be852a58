"""The batch history: every provider batch's life, one row per batch, in the ledger database.

A row is written the first time a batch is polled and brought up to date at every poll after:
the time the batch entered each phase (``validating``, ``in_progress``, ``finalizing``) and
the time it ended with its final status (``completed``, ``expired``, ``failed``,
``cancelled``). Times are the provider's own when its batch object reports them
(``BatchState.times``), else the first poll that saw the phase. Statistics (turnaround
percentiles, tasks per second) are read back as a polars frame by `read_history`.
"""

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from maple_engine.model import BatchState, Submission

PHASES = ("validating", "in_progress", "finalizing")
ENDINGS = ("completed", "expired", "failed", "cancelled")
_KEY = ("provider", "batch_id")


def history_table(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "batch_history",
        md,
        sa.Column("provider", sa.String(255), primary_key=True),
        sa.Column("batch_id", sa.String(255), primary_key=True),
        *(sa.Column(c, sa.String(255), nullable=False) for c in ("model", "job", "team")),
        sa.Column("version", sa.Integer, nullable=True),
        sa.Column("shard", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(32), nullable=False),  # a phase or an ending
        sa.Column("provider_status", sa.String(64), nullable=False),  # as the provider says
        # naive UTC: created, each phase entered, ended (any ending), last poll
        *(sa.Column(f"{c}_at", sa.DateTime, nullable=True) for c in ("created", *PHASES)),
        sa.Column("ended_at", sa.DateTime, nullable=True),
        sa.Column("seen_at", sa.DateTime, nullable=False),
        sa.Index("ix_batch_history_created_at", "created_at"),
        sa.Index("ix_batch_history_queue", "provider", "model"),
    )


@dataclasses.dataclass(frozen=True)
class BatchLabels:
    """Whose batches these are: the job's model, team and version."""

    model: str
    team: str
    version: int | None = None


def phase(state: BatchState) -> str:
    """The provider's status as one of `PHASES` or `ENDINGS` (providers name them differently:
    ``BATCH_STATE_RUNNING``, ``InProgress``, ``ended``, ``Stopped``, ...)."""
    word = state.status.lower().replace("batch_state_", "").replace("job_state_", "")
    if state.ended:
        for ending, stems in (
            ("expired", ("expir",)),
            ("cancelled", ("cancel", "stopp")),
            ("failed", ("fail",)),
        ):
            if any(s in word for s in stems):
                return ending
        return "completed"
    if "finaliz" in word:
        return "finalizing"
    if any(s in word for s in ("validat", "pending", "submitted", "scheduled", "queued")):
        return "validating"
    return "in_progress"


def _naive(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None)


def _parse(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return _naive(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


def history_rows(
    labels: BatchLabels,
    polled: Iterable[tuple[Submission, BatchState]],
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """One row per polled batch: the times this poll knows (the provider's, else now)."""
    seen = _naive(now or datetime.now(UTC))
    rows = []
    for sub, state in polled:
        reported = {k: _naive(datetime.fromtimestamp(v, UTC)) for k, v in state.times}
        status = phase(state)
        row: dict[str, Any] = {
            "provider": sub.provider,
            "batch_id": sub.batch_id,
            "model": labels.model,
            "job": sub.job,
            "team": labels.team,
            "version": labels.version,
            "shard": sub.shard,
            "attempt": sub.attempt,
            "requests": state.total or sub.request_count,
            "prompt_tokens": None,
            "status": status,
            "provider_status": state.status[:64],
            "created_at": reported.get("created") or _parse(sub.submitted_at) or seen,
            "seen_at": seen,
        }
        for name in PHASES:
            row[f"{name}_at"] = reported.get(name) or (seen if status == name else None)
        row["ended_at"] = (reported.get("ended") or seen) if status in ENDINGS else None
        rows.append(row)
    return rows


def upsert(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert new batches; for known ones keep the first time of each phase and the end."""
    if not rows:
        return
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(table)
    new = stmt.excluded
    kept_first = ("created_at", *(f"{p}_at" for p in PHASES))
    updates: dict[str, Any] = {c: sa.func.coalesce(table.c[c], new[c]) for c in kept_first}
    ended = table.c.ended_at.is_not(None)
    updates["ended_at"] = sa.func.coalesce(table.c.ended_at, new.ended_at)
    updates["status"] = sa.case((ended, table.c.status), else_=new.status)
    updates["provider_status"] = sa.case(
        (ended, table.c.provider_status), else_=new.provider_status
    )
    for name in ("requests", "seen_at", "version"):
        updates[name] = new[name]
    updates["prompt_tokens"] = sa.func.coalesce(new.prompt_tokens, table.c.prompt_tokens)
    conn.execute(stmt.on_conflict_do_update(index_elements=_KEY, set_=updates), rows)


@dataclasses.dataclass(frozen=True)
class HistoryFilter:
    """Which batches a report covers (``None``: no restriction); days are UTC, ``until``
    excluded."""

    since: date | None = None
    job: str | None = None
    team: str | None = None
    provider: str | None = None
    until: date | None = None

    def where(self, table: sa.Table) -> list[sa.ColumnElement[bool]]:
        clauses = [table.c[name] == value for name, value in self._labels().items()]
        if self.since is not None:
            clauses.append(table.c.created_at >= datetime.combine(self.since, time.min))
        if self.until is not None:
            clauses.append(table.c.created_at < datetime.combine(self.until, time.min))
        return clauses

    def _labels(self) -> Mapping[str, str]:
        values = {"job": self.job, "team": self.team, "provider": self.provider}
        return {k: v for k, v in values.items() if v is not None}


HISTORY_SCHEMA: dict[str, Any] = {
    **{c: pl.String for c in ("provider", "model", "job", "team", "batch_id", "shard")},
    "version": pl.Int64,
    "attempt": pl.Int64,
    "requests": pl.Int64,
    "prompt_tokens": pl.Int64,
    "status": pl.String,
    "provider_status": pl.String,
    **{f"{c}_at": pl.Datetime("us") for c in ("created", *PHASES, "ended", "seen")},
}


def read_history(
    conn: sa.Connection | None, table: sa.Table, costs: sa.Table, where: HistoryFilter
) -> pl.DataFrame:
    """Every batch matching ``where``, oldest first, with ``duration_s`` (created to ended; null
    while it runs) and ``tasks_per_s`` (requests over duration); ``prompt_tokens`` are the
    billed input tokens of the batch's attempt in ``costs`` once it is collected."""
    rows: list[dict[str, Any]] = []
    if conn is not None:
        same = [table.c[k] == costs.c[k] for k in ("job", "shard", "attempt")]
        prompt = sa.func.coalesce(table.c.prompt_tokens, costs.c.input_tokens)
        columns = [c for c in table.c if c.name != "prompt_tokens"]
        query = (
            sa.select(*columns, prompt.label("prompt_tokens"))
            .select_from(table.outerjoin(costs, sa.and_(*same)))
            .where(*where.where(table))
            .order_by(table.c.created_at)
        )
        rows = [dict(r._mapping) for r in conn.execute(query)]
    frame = pl.DataFrame(rows, schema=HISTORY_SCHEMA).select(list(HISTORY_SCHEMA))
    frame = frame.with_columns(pl.col(pl.Datetime).dt.replace_time_zone("UTC"))
    duration = (pl.col("ended_at") - pl.col("created_at")).dt.total_microseconds() / 1e6
    return frame.with_columns(duration.alias("duration_s")).with_columns(
        pl.when(pl.col("duration_s") > 0)
        .then(pl.col("requests") / pl.col("duration_s"))
        .alias("tasks_per_s")
    )
