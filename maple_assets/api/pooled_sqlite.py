"""Dagster's SQLite run and event-log storages with their database engines kept open.

Dagster's ``SqliteEventLogStorage`` creates a SQLAlchemy engine, opens a connection and
disposes of both for every event it stores, twice for an asset event (the run's database and
the index). Each new engine also starts with an empty compiled-statement cache. A 1M-row job
stores about 160 events and spent 2.5 s of CPU holding the GIL there, most of it in engine
set-up, connection churn and statement compilation; 10M rows store ten times as many.

These storages keep one engine per database file (the runs database, the event index and the
few most recent runs' event logs) with SQLAlchemy's default pool for SQLite files: the files,
tables, locking and WAL mode are Dagster's own, so the Dagster UI and other processes read and
write the same home as before.
"""

import collections
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine

from resources.dagster_private import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqlEventLogStorageMetadata,
    SqliteEventLogStorage,
    SqliteRunStorage,
    get_alembic_config,
    sqlite_event_log,
)

#: run databases kept open besides the index (a driver writes one run at a time)
OPEN_RUNS = 4


@functools.cache
def _scripts() -> ScriptDirectory:
    """Dagster's event-log migrations (its head revision stamps a new run's database)."""
    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses one engine and connection per database file."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: collections.OrderedDict[str, Engine] = collections.OrderedDict()
        self._pid = os.getpid()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data=inst_data)
        # re-entrant: Dagster asks ``has_table`` while it holds a connection
        self._db_lock = threading.RLock()  # type: ignore[assignment]

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "PooledSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        if self._pid != os.getpid():  # a forked child: never use the parent's connections
            self._engines.clear()
            self._pid = os.getpid()
        engine = self._engines.pop(shard, None)
        if engine is None:
            engine = create_engine(
                self.conn_string_for_shard(shard),
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
            )
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
        self._engines[shard] = engine  # most recently used last
        runs = [s for s in self._engines if s != INDEX_SHARD_NAME]
        for old in runs[: max(0, len(runs) - OPEN_RUNS)]:
            self._engines.pop(old).dispose()
        return engine

    @contextlib.contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """A new run's database: Dagster's tables, WAL, stamped with the head revision, read
        once per process. Dagster's own set-up loads its ~90 alembic migration files twice per
        run (45 ms of CPU, 6 s over a 10M-row job's runs); the index and any database this
        cannot set up quickly go through Dagster's set-up."""
        if for_index_shard:
            super()._initdb(engine, for_index_shard)
            return
        try:
            with engine.connect() as conn:
                context = MigrationContext.configure(conn)
                if context.get_current_revision() is None:
                    SqlEventLogStorageMetadata.create_all(conn)
                    conn.execute(text("PRAGMA journal_mode=WAL;"))
                    context.stamp(_scripts(), "head")
                    conn.commit()
        except Exception:  # noqa: BLE001 - e.g. another process creating it: Dagster retries
            super()._initdb(engine, for_index_shard)

    def has_table(self, table_name: str) -> bool:
        """Asked before every dynamic-partition lookup and asset event (Dagster opens a new
        engine for it each time); a table found once stays (no migration drops one)."""
        if table_name in self._tables:
            return True
        with self._connect(INDEX_SHARD_NAME) as conn:
            found = bool(conn.dialect.has_table(conn, table_name))
        if found:
            self._tables.add(table_name)
        return found

    def close_engines(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self.close_engines()  # the run files are deleted: no connection may keep one alive
        super().wipe()

    def upgrade(self) -> None:
        self.close_engines()
        super().upgrade()
        self.close_engines()

    def dispose(self) -> None:
        self.close_engines()
        super().dispose()


class PooledSqliteRunStorage(SqliteRunStorage):
    """``SqliteRunStorage`` that reuses one engine (and its pool) for every connection."""

    def __init__(self, conn_string: str, inst_data: Any = None) -> None:
        super().__init__(conn_string, inst_data=inst_data)
        self._pooled: Engine | None = None
        self._pid = os.getpid()

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "PooledSqliteRunStorage":
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        if self._pooled is None or self._pid != os.getpid():
            self._pooled, self._pid = create_engine(self._conn_string), os.getpid()
        with self._pooled.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        if self._pooled is not None:
            self._pooled.dispose()
            self._pooled = None
        super().dispose()
