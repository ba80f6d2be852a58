"""The cost ledger: what every job spent, per billed shard attempt, in a real database.

One record per (job, shard, attempt) holds exact sums over the attempt's billed requests: request
count, tokens by kind, the cost actually paid (`cost_usd`) and what the same usage would have cost
at real-time prices (`realtime_cost_usd`, so reports can show what batch saved). Recording is an
upsert on (job, shard, attempt), so recording the same results again (a re-run after a crash) does
not double count. Build records with `AttemptCost.from_rows` over the per-row frame so the ledger
reconciles with the rows' `llm_cost_usd` to the micro-dollar.

Database: `database_url` (a SQLAlchemy URL; entry points fill it from `$MAPLE_COST_DB`), else a
SQLite file `<storage_root>/costs.sqlite`. SQLite needs a local file, so for an `s3://` (or any
remote) storage root the default is `~/.maple/costs.sqlite`; point `MAPLE_COST_DB` at PostgreSQL
(`postgresql+psycopg2://user:pass@host/db`) to share one ledger between machines. SQLite runs in
WAL mode with a 30 s busy timeout and takes the write lock when a transaction begins, so several
processes can record at once.

The tables and their migrations: ``maple_engine.ledger.schema``.
"""

import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, time
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, get_args

import polars as pl
import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from sqlalchemy.dialects import postgresql, sqlite

from maple_engine.errors import StorageError
from maple_engine.ledger.admissions import Admission, admit
from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.batch_history import (
    BatchLabels,
    HistoryFilter,
    history_rows,
    read_history,
    upsert,
)
from maple_engine.ledger.schema import (
    EXTRA_TOKENS,
    TOKENS,
    attempt_costs,
    batch_history,
    budget_admissions,
    create_engine,
    migrate,
    sqlite_exists,
)
from maple_engine.ledger.usage import ledger_usage
from maple_engine.model import BatchState, Submission
from maple_engine.settings import DEFAULT_STORAGE
from maple_engine.storage.layout import COSTS_DB

GroupBy = Literal["team", "job", "model", "day"]
_KEY = ("job", "shard", "attempt")


def default_sqlite_path(storage_root: str) -> Path:
    """`<storage_root>/costs.sqlite` for a local root; `~/.maple/costs.sqlite` for a remote one."""
    if "://" in storage_root and not storage_root.startswith("file://"):
        return Path.home() / ".maple" / COSTS_DB
    return Path(storage_root.removeprefix("file://")).expanduser().resolve() / COSTS_DB


class CostLedger(BaseModel):
    """Records what each job spends, per shard attempt, and reports it by team, job, model or
    day. Use it as a context manager (or call `close()`); ``resources.costs.CostLedger`` is
    the same ledger as a Dagster resource."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the ledger: sqlite:///path or postgresql+psycopg2://... "
        "Default: SQLite <storage_root>/costs.sqlite (entry points pass $MAPLE_COST_DB).",
    )
    storage_root: str = Field(
        default=DEFAULT_STORAGE,
        description="Storage root whose costs.sqlite is the default ledger (for s3:// roots "
        "the default is ~/.maple/costs.sqlite, since SQLite needs a local file).",
    )
    prices: str | None = Field(
        default=None,
        description="Price-overrides file (JSON) jobs price with; entry points pass $MAPLE_PRICES.",
    )
    _engine: sa.Engine | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def resolved_url(self) -> str:
        """The database URL in use."""
        return self.database_url or f"sqlite:///{default_sqlite_path(self.storage_root)}"

    def record(self, entry: AttemptCost) -> None:
        """Record the costs of one shard attempt; recording it again replaces the sums (never
        adds to them) and keeps the first `recorded_at`."""
        self.record_many([entry])

    def record_many(self, entries: Iterable[AttemptCost]) -> None:
        """Record (or replace) several shard attempts in one transaction."""
        rows = [_to_row(e) for e in entries]
        if not rows:
            return
        with self._write() as conn:
            insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            stmt = insert(attempt_costs)
            kept = {*_KEY, "recorded_at"}
            updates = {c.name: stmt.excluded[c.name] for c in attempt_costs.c if c.name not in kept}
            conn.execute(stmt.on_conflict_do_update(index_elements=_KEY, set_=updates), rows)

    def report(self, by: GroupBy = "team", since: date | None = None) -> list[dict[str, Any]]:
        """Totals per `by` key (sorted by key), optionally only for records since a UTC day."""
        if by not in get_args(GroupBy):
            raise ValueError(f"by must be one of {get_args(GroupBy)}, not {by!r}")
        t = attempt_costs.c
        with self._read() as conn:
            if conn is None:
                return []
            key = _day(conn, t.recorded_at) if by == "day" else t[by]
            query = (
                sa.select(
                    key.label("key"),
                    *(sa.func.sum(t[c]).label(c) for c in ("requests", *TOKENS, *EXTRA_TOKENS)),
                    sa.func.sum(t.cost_usd).label("cost_usd"),
                    sa.func.sum(t.realtime_cost_usd).label("realtime_cost_usd"),
                    sa.func.sum(sa.func.coalesce(t.uncached_cost_usd, t.cost_usd)).label(
                        "uncached_cost_usd"
                    ),
                )
                .group_by(key)
                .order_by(key)
            )
            if since is not None:
                query = query.where(t.recorded_at >= datetime.combine(since, time.min))
            return [_report_row(by, r._mapping) for r in conn.execute(query)]

    def job_total(self, job: str) -> float:
        """Total USD paid for `job` (0.0 when nothing is recorded)."""
        with self._read() as conn:
            if conn is None:
                return 0.0
            q = sa.select(sa.func.sum(attempt_costs.c.cost_usd)).where(attempt_costs.c.job == job)
            return float(conn.execute(q).scalar() or 0.0)

    def admit(
        self,
        key: tuple[str, str, int],
        estimate_usd: float,
        budget_usd: float,
        scope: Collection[str] | None = None,
    ) -> Admission:
        """Atomically admit attempt ``key`` (job, shard, attempt) under ``budget_usd``, counting
        the spend of the shards in ``scope`` (default: the whole job;
        `maple_engine.ledger.admissions`)."""
        with self._write() as conn:
            return admit(
                conn,
                attempt_costs,
                budget_admissions,
                key,
                estimate_usd=estimate_usd,
                budget_usd=budget_usd,
                scope=scope,
            )

    def record_batches(
        self, labels: BatchLabels, polled: Iterable[tuple[Submission, BatchState]]
    ) -> None:
        """Bring the batch history up to date with one poll of a job's batches."""
        rows = history_rows(labels, polled)
        if rows:
            with self._write() as conn:
                upsert(conn, batch_history, rows)

    def batch_history(self, where: HistoryFilter | None = None) -> pl.DataFrame:
        """The recorded batches (`maple_engine.ledger.batch_history.read_history`)."""
        with self._read() as conn:
            return read_history(conn, batch_history, attempt_costs, where or HistoryFilter())

    def billed_usage(
        self, providers: Sequence[str], days: tuple[date, date], *, by_team: bool = False
    ) -> pl.DataFrame:
        """Tokens and dollars per day and model, and team when ``by_team``
        (`maple_engine.ledger.usage.ledger_usage`)."""
        with self._read() as conn:
            return ledger_usage(
                conn, attempt_costs, batch_history, providers, days, by_team=by_team
            )

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """One write transaction on the ledger (the shared queue budget uses it)."""
        with self._write() as conn:
            yield conn

    def job_entries(self, job: str) -> list[AttemptCost]:
        """Every recorded attempt of `job`, ordered by shard and attempt."""
        t = attempt_costs.c
        with self._read() as conn:
            if conn is None:
                return []
            q = sa.select(attempt_costs).where(t.job == job).order_by(t.shard, t.attempt)
            return [_from_row(r._mapping) for r in conn.execute(q)]

    def close(self) -> None:
        """Release the database connections (the tracker reconnects if used again)."""
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[sa.Connection | None]:
        """A read transaction, or None for a SQLite file that does not exist yet (nothing is
        recorded, and a report must not create files)."""
        url = sa.make_url(self.resolved_url())
        if url.get_backend_name() == "sqlite" and not sqlite_exists(url):
            yield None
            return
        with self._write() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        url = sa.make_url(self.resolved_url())
        engine = self._get_engine(url)
        try:
            with engine.begin() as conn:
                yield conn
        except sa.exc.OperationalError as exc:
            where = url.render_as_string(hide_password=True)
            raise StorageError(f"Cost ledger {where} failed: {exc.orig}") from exc

    def _get_engine(self, url: sa.URL) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                engine = create_engine(url)
                try:
                    with engine.begin() as conn:
                        migrate(conn)
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
            return self._engine


def _day(conn: sa.Connection, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    if conn.dialect.name == "sqlite":
        return sa.func.date(column)
    return sa.cast(column, sa.Date)


def _to_row(e: AttemptCost) -> dict[str, Any]:
    row = {c.name: getattr(e, c.name) for c in attempt_costs.c}
    row["recorded_at"] = e.recorded_at.astimezone(UTC).replace(tzinfo=None)
    return row


def _from_row(row: Any) -> AttemptCost:
    values = dict(row)
    values["recorded_at"] = values["recorded_at"].replace(tzinfo=UTC)
    for name in ("requests", *TOKENS, *EXTRA_TOKENS):
        values[name] = int(values[name])
    return AttemptCost(**values)


def _report_row(by: str, row: Any) -> dict[str, Any]:
    key = row["key"]
    cost, realtime = float(row["cost_usd"]), float(row["realtime_cost_usd"])
    return {
        by: key.isoformat() if isinstance(key, date) else str(key),
        "requests": int(row["requests"]),
        "input_tokens": int(row["input_tokens"]),
        "cached_input_tokens": int(row["cached_input_tokens"]),
        "output_tokens": int(row["output_tokens"]),
        "reasoning_tokens": int(row["reasoning_tokens"] or 0),
        "estimated_tokens": int(row["estimated_tokens"] or 0),
        "downgraded_requests": int(row["downgraded_requests"] or 0),
        "cost_usd": round(cost, 10),
        "savings_usd": round(realtime - cost, 10),
        "cache_savings_usd": round(float(row["uncached_cost_usd"]) - cost, 10),
    }
