"""Exclusive creates for an S3 store that ignores ``If-None-Match``, one at a time through the
ledger's PostgreSQL database.

`maple_engine.storage.exclusive` sends here every exclusive create (leases, batch claims) on a
store found without conditional writes, when the ledger is PostgreSQL. Each create takes a
transaction-scoped advisory lock named by the object's URI
(``pg_advisory_xact_lock``), looks for the object, writes it only if it is absent, and commits,
which releases the lock. Every process of a deployment shares the ledger's database, so of
several processes creating one key, exactly one finds it absent. A process that dies holding
the lock loses its connection, and PostgreSQL releases the lock with it; the object is then
there whole or not at all (an S3 object appears only when its upload completes). Nothing is
stored in the database: the object stays the truth (a job's state deleted from the store is
gone, and its keys can be created again).

Every process creating on that store must use the same database: a process with another
ledger (or none) would not see these locks, so such a store is refused where no PostgreSQL
ledger is configured (`maple_engine.storage.probe.check_store`).
"""

import functools
import hashlib
import threading
from collections.abc import Callable

import sqlalchemy as sa

from maple_engine.errors import StorageError
from maple_engine.ledger.schema import create_engine

LOCK_TIMEOUT = "120s"  # a holder's create is one HEAD and one small PUT


def create_locks(url: str | None) -> "CreateLocks | None":
    """Locks in the ledger's database ``url`` (one set of connections per URL in a process),
    or None when the ledger is not PostgreSQL."""
    if url is None or sa.make_url(url).get_backend_name() != "postgresql":
        return None
    return _locks(url)


@functools.cache
def _locks(url: str) -> "CreateLocks":
    return CreateLocks(url)


class CreateLocks:
    """Advisory locks in one PostgreSQL database, one per object URI."""

    def __init__(self, url: str) -> None:
        self._url = sa.make_url(url)
        self.where = self._url.render_as_string(hide_password=True)
        self._engine: sa.Engine | None = None
        self._lock = threading.Lock()

    def create(self, uri: str, absent: Callable[[], bool], write: Callable[[], None]) -> bool:
        """Under the lock of ``uri``: ``write()`` it if ``absent()``; True if this call did."""
        try:
            with self._engine_once().begin() as conn:
                conn.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(self.lock_id(uri))))
                if not absent():
                    return False
                write()
        except sa.exc.OperationalError as exc:
            where = f"{uri}: exclusive create in {self.where}"
            raise StorageError(f"{where} failed: {exc.orig}") from exc
        return True

    def lock_id(self, uri: str) -> int:
        """The advisory lock of ``uri``: 64 bits of its digest (two URIs sharing one, or one
        URI on two stores, only wait for each other)."""
        digest = hashlib.blake2b(uri.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def _engine_once(self) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                self._engine = create_engine(self._url)
            return self._engine
