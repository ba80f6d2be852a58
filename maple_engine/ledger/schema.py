"""The cost ledger's tables, its database engine, and the schema migrations.

Migrations are alembic revisions in ``maple_engine/ledger/migrations/versions``
(``maple_ledger_version`` holds the database's revision). On first use a ledger applies the
missing ones in its write transaction (under an advisory lock on PostgreSQL, the write lock on
SQLite), so concurrent first uses are safe. To change the schema, add a revision after the head
(copy the latest one, never edit a shipped one) and update the table definitions below to the
resulting shape. A database whose revision this code does not know (written by a newer Maple)
is refused rather than written. A ledger made before the revisions existed (a
``schema_version`` table holding N) is stamped with revision N and carried on from there.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from maple_engine.errors import ConfigError, StorageError
from maple_engine.ledger.admissions import admissions_table
from maple_engine.ledger.batch_history import history_table
from maple_engine.ledger.queues import queue_table
from maple_engine.ledger.rate_holders import rate_holders

if TYPE_CHECKING:  # alembic (with mako and pygments, ~0.2 s) loads when a ledger is opened
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
#: Counts within those: of the output, reasoning; of all, the estimated (no usage reported);
#: of the requests, those served at the standard tier though another was asked (downgraded).
EXTRA_TOKENS = ("reasoning_tokens", "estimated_tokens", "downgraded_requests")
_PG_MIGRATION_LOCK = 0x6D61706C  # "mapl": pg_advisory_xact_lock id for schema migrations

MIGRATIONS = Path(__file__).with_name("migrations")
# Not alembic's default table: a deployment's ledger may share its database with Dagster's
# own storage, which keeps its alembic revision in ``alembic_version``.
VERSION_TABLE = "maple_ledger_version"
_OPTS = {"version_table": VERSION_TABLE}
metadata = sa.MetaData()
# Before alembic: one integer, the number of migrations applied (revisions "0001".."0003").
legacy_schema_version = sa.Table(
    "schema_version", sa.MetaData(), sa.Column("version", sa.Integer, nullable=False)
)


def _attempt_costs(md: sa.MetaData) -> sa.Table:
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
        sa.Column("uncached_cost_usd", sa.Double, nullable=True),
        *(sa.Column(c, sa.BigInteger, nullable=False, server_default="0") for c in EXTRA_TOKENS),
        sa.Index("ix_attempt_costs_recorded_at", "recorded_at"),
        sa.Index("ix_attempt_costs_team", "team"),
    )


# The current shape of every table (after the head revision; a test compares the two).
attempt_costs = _attempt_costs(metadata)
budget_admissions = admissions_table(metadata)
queue_slots = queue_table(metadata)
batch_history = history_table(metadata)
rate_holders.to_metadata(metadata)


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


def migrations() -> "ScriptDirectory":
    """The ledger's alembic revisions."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS))


def head_revision() -> str:
    head = migrations().get_current_head()
    assert head is not None
    return head


def current_revision(conn: sa.Connection) -> str | None:
    """The database's revision (``None``: nothing applied yet)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn, opts=_OPTS).get_current_revision()


def migrate(conn: sa.Connection) -> None:
    """Bring the ledger to the head revision inside ``conn``'s transaction."""
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext

    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
    script = migrations()
    context = MigrationContext.configure(conn, opts=_OPTS)
    current = context.get_current_revision() or _stamp_legacy(conn, context, script)
    known = {rev.revision for rev in script.walk_revisions()}
    if current is not None and current not in known:
        raise StorageError(
            f"The cost ledger's schema is revision {current}, newer than this Maple understands "
            f"(head {script.get_current_head()}). Upgrade Maple before recording costs in it."
        )
    if current == script.get_current_head():
        return

    def upgrade(revision: Any, _context: Any) -> Any:
        return script._upgrade_revs("head", revision)  # what `alembic upgrade head` runs

    with EnvironmentContext(Config(), script, fn=upgrade, destination_rev="head") as env:
        env.configure(connection=conn, version_table=VERSION_TABLE)
        env.run_migrations()


def _stamp_legacy(
    conn: sa.Connection, context: "MigrationContext", script: "ScriptDirectory"
) -> str | None:
    """A ledger from before alembic: stamp the revision its ``schema_version`` stands for."""
    if not sa.inspect(conn).has_table("schema_version"):
        return None
    version = conn.execute(sa.select(sa.func.max(legacy_schema_version.c.version))).scalar()
    if not version:
        return None
    revision = f"{version:04d}"
    context.stamp(script, revision)
    return revision
