"""The cost ledger's tables, its database engine, and the schema migrations.

Migration story: `schema_version` holds one integer; `MIGRATIONS` is an ordered list of functions,
migration N bringing the schema from version N-1 to N. On first use a tracker applies the missing
ones in one transaction (under an advisory lock on PostgreSQL, the write lock on SQLite), so
concurrent first uses are safe. To change the schema, append a migration (never edit a shipped
one) and update the `attempt_costs` table below to the resulting shape. A database newer than the
code is refused rather than written.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from maple_engine.errors import ConfigError, StorageError
from maple_engine.submit.admissions import admissions_table
from maple_engine.submit.queue_ledger import queue_table

TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
_PG_MIGRATION_LOCK = 0x6D61706C  # "mapl": pg_advisory_xact_lock id for schema migrations

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
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("requests", *TOKENS)),
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


def create_engine(url: sa.URL) -> sa.Engine:
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


def sqlite_exists(url: sa.URL) -> bool:
    return not url.database or url.database == ":memory:" or Path(url.database).exists()


def migrate(conn: sa.Connection) -> None:
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
