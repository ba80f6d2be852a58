"""The cost ledger: what every job spent, per billed shard attempt, in a real database.

One record per (job, shard, attempt) holds exact sums over the attempt's billed requests: request
count, tokens by kind, the cost actually paid (`cost_usd`) and what the same usage would have cost
at real-time prices (`realtime_cost_usd`, so reports can show what batch saved). Recording is an
upsert on (job, shard, attempt), so recording the same results again (a re-run after a crash) does
not double count. Build records with `AttemptCost.from_rows` over the per-row frame so the ledger
reconciles with the rows' `llm_cost_usd` to the micro-dollar.

Database: `database_url` (a SQLAlchemy URL), else `$MAPLE_COST_DB`, else a SQLite file
`<storage_root>/costs.sqlite`. SQLite needs a local file, so for an `s3://` (or any remote)
storage root the default is `~/.maple/costs.sqlite`; point `MAPLE_COST_DB` at PostgreSQL
(`postgresql+psycopg2://user:pass@host/db`) to share one ledger between machines. SQLite runs in
WAL mode with a 30 s busy timeout and takes the write lock when a transaction begins, so several
processes can record at once.

Migration story: `schema_version` holds one integer; `MIGRATIONS` is an ordered list of functions,
migration N bringing the schema from version N-1 to N. On first use a tracker applies the missing
ones in one transaction (under an advisory lock on PostgreSQL, the write lock on SQLite), so
concurrent first uses are safe. To change the schema, append a migration (never edit a shipped
one) and update the `attempt_costs` table below to the resulting shape. A database newer than the
code is refused rather than written.
"""

import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, get_args

import dagster as dg
import polars as pl
import sqlalchemy as sa
from pydantic import Field, PrivateAttr
from sqlalchemy.dialects import postgresql, sqlite

from resources.admissions import Admission, admissions_table, admit
from resources.deployment import require_shared
from resources.errors import ConfigError, StorageError
from resources.layout import COSTS_DB
from resources.pricing import ModelPrice, cost_expr
from resources.queue_ledger import queue_table
from resources.settings import COST_DB_ENV, Settings

Mode = Literal["batch", "realtime"]
GroupBy = Literal["team", "job", "model", "day"]
_KEY = ("job", "shard", "attempt")
_TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
_PG_MIGRATION_LOCK = 0x6D61706C  # "mapl": pg_advisory_xact_lock id for schema migrations


@dataclass(frozen=True)
class AttemptCost:
    """Exact sums over the billed requests of one attempt of one shard of one job."""

    job: str
    team: str
    model: str
    provider: str
    mode: Mode
    shard: str
    attempt: int
    batch_id: str | None
    requests: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float
    realtime_cost_usd: float
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        if self.mode not in get_args(Mode):
            raise ValueError(f"mode must be 'batch' or 'realtime', not {self.mode!r}")
        counts = (self.attempt, self.requests, *(getattr(self, t) for t in _TOKENS))
        if min(counts) < 0:
            raise ValueError(f"attempt, requests and tokens must not be negative: {self}")
        if self.recorded_at.tzinfo is None:
            object.__setattr__(self, "recorded_at", self.recorded_at.replace(tzinfo=UTC))

    @classmethod
    def from_rows(
        cls,
        rows: pl.DataFrame,
        price: ModelPrice,
        *,
        job: str,
        team: str,
        model: str,
        provider: str,
        mode: Mode,
        shard: str,
        attempt: int,
        batch_id: str | None,
    ) -> "AttemptCost":
        """Sum one attempt's billed rows (columns `input_tokens`, `cached_input_tokens`,
        `cache_write_tokens`, `output_tokens`; one row per billed request)."""
        sums = rows.select(
            *(pl.col(t).sum().cast(pl.Int64) for t in _TOKENS),
            cost_expr(price, batch=mode == "batch").sum().alias("cost"),
            cost_expr(price, batch=False).sum().alias("realtime"),
        ).row(0, named=True)
        return cls(
            job=job,
            team=team,
            model=model,
            provider=provider,
            mode=mode,
            shard=shard,
            attempt=attempt,
            batch_id=batch_id,
            requests=rows.height,
            input_tokens=int(sums["input_tokens"] or 0),
            cached_input_tokens=int(sums["cached_input_tokens"] or 0),
            cache_write_tokens=int(sums["cache_write_tokens"] or 0),
            output_tokens=int(sums["output_tokens"] or 0),
            cost_usd=float(sums["cost"] or 0.0),
            realtime_cost_usd=float(sums["realtime"] or 0.0),
        )


metadata = sa.MetaData()
schema_version = sa.Table(
    "schema_version", metadata, sa.Column("version", sa.Integer, nullable=False)
)


def _attempt_costs_v1(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "attempt_costs",
        md,
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        *(sa.Column(c, sa.String(255), nullable=False) for c in ("team", "model", "provider")),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(255), nullable=True),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("requests", *_TOKENS)),
        sa.Column("cost_usd", sa.Double, nullable=False),
        sa.Column("realtime_cost_usd", sa.Double, nullable=False),
        sa.Column("recorded_at", sa.DateTime, nullable=False),  # naive UTC
        sa.Index("ix_attempt_costs_recorded_at", "recorded_at"),
        sa.Index("ix_attempt_costs_team", "team"),
    )


attempt_costs = _attempt_costs_v1(metadata)  # the current shape (after the last migration)


def _migration_1(conn: sa.Connection) -> None:
    _attempt_costs_v1(sa.MetaData()).create(conn)


budget_admissions = admissions_table(metadata)


def _migration_2(conn: sa.Connection) -> None:
    admissions_table(sa.MetaData()).create(conn)


queue_slots = queue_table(metadata)


def _migration_3(conn: sa.Connection) -> None:
    queue_table(sa.MetaData()).create(conn)


MIGRATIONS: list[Callable[[sa.Connection], None]] = [_migration_1, _migration_2, _migration_3]


def default_sqlite_path(storage_root: str) -> Path:
    """`<storage_root>/costs.sqlite` for a local root; `~/.maple/costs.sqlite` for a remote one."""
    if "://" in storage_root and not storage_root.startswith("file://"):
        return Path.home() / ".maple" / COSTS_DB
    return Path(storage_root.removeprefix("file://")).expanduser().resolve() / COSTS_DB


class CostTracker(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Records what each job spends, per shard attempt, and reports it by team, job, model or
    day. Use it as a context manager (or call `close()`) outside Dagster."""

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the ledger: sqlite:///path or postgresql+psycopg2://... "
        "Default: $MAPLE_COST_DB, else SQLite <storage_root>/costs.sqlite.",
    )
    storage_root: str = Field(
        default=".maple",
        description="Storage root whose costs.sqlite is the default ledger (for s3:// roots "
        "the default is ~/.maple/costs.sqlite, since SQLite needs a local file).",
    )
    _engine: sa.Engine | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def resolved_url(self) -> str:
        """The database URL in use."""
        url = self.database_url or Settings.load().cost_db
        return url or f"sqlite:///{default_sqlite_path(self.storage_root)}"

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
                    *(sa.func.sum(t[c]).label(c) for c in ("requests", *_TOKENS)),
                    sa.func.sum(t.cost_usd).label("cost_usd"),
                    sa.func.sum(t.realtime_cost_usd).label("realtime_cost_usd"),
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
        the spend of the shards in ``scope`` (default: the whole job; `resources.admissions`)."""
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

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """At run start: refuse a SQLite ledger when runs do not share a machine."""
        url = sa.make_url(self.resolved_url())
        if url.get_backend_name() == "sqlite":
            where = url.render_as_string(hide_password=True)
            require_shared(
                context.instance,
                "cost ledger",
                where,
                f"Set {COST_DB_ENV} to postgresql+psycopg2://user:password@host/db",
            )

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

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
        if url.get_backend_name() == "sqlite" and not _sqlite_exists(url):
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
                engine = _create_engine(url)
                try:
                    with engine.begin() as conn:
                        _migrate(conn)
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
            return self._engine


def _create_engine(url: sa.URL) -> sa.Engine:
    backend = url.get_backend_name()
    if backend == "postgresql":
        return sa.create_engine(url, pool_size=2, max_overflow=4, pool_pre_ping=True)
    if backend != "sqlite":
        raise ConfigError(
            f"Cost ledger URL {url.render_as_string(hide_password=True)}: only sqlite:/// and "
            "postgresql+psycopg2:// databases are supported. Fix database_url or $MAPLE_COST_DB."
        )
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30})
    sa.event.listen(engine, "connect", _sqlite_on_connect)
    sa.event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we issue BEGIN IMMEDIATE ourselves
    cursor = dbapi_connection.cursor()
    for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = NORMAL"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_exists(url: sa.URL) -> bool:
    return not url.database or url.database == ":memory:" or Path(url.database).exists()


def _migrate(conn: sa.Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
    schema_version.create(conn, checkfirst=True)
    current = conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0
    if current > len(MIGRATIONS):
        raise StorageError(
            f"The cost ledger's schema is version {current}, newer than this Maple understands "
            f"({len(MIGRATIONS)}). Upgrade Maple before recording costs in it."
        )
    for version in range(current + 1, len(MIGRATIONS) + 1):
        MIGRATIONS[version - 1](conn)
    if current < len(MIGRATIONS):
        conn.execute(schema_version.delete())
        conn.execute(schema_version.insert().values(version=len(MIGRATIONS)))


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
    for name in ("requests", *_TOKENS):
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
        "cost_usd": round(cost, 10),
        "savings_usd": round(realtime - cost, 10),
    }
