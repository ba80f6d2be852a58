"""Exclusive creates on an S3 store: its own ``If-None-Match: *``, or locks kept elsewhere.

How `Storage.create_exclusive` creates under an ``s3://`` root. On a store that honours
conditional writes (`maple_engine.storage.store_features`, probed once per process) it is a
PutObject with ``If-None-Match: *``. On one that does not, the creates go through the
`CreateLocks` kept for that store (`keep_creates`, at start-up: the ledger's PostgreSQL
database, `maple_engine.ledger.create_locks`); with none kept, the store is refused
(`StoreLacks`) before anything is created on it.
"""

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from maple_engine.errors import StorageError
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.store_features import (
    StoreLacks,
    error_code,
    refusal,
    root_features,
    store_name,
)


class CreateLocks(Protocol):
    """Makes creates of one key exclusive where the store cannot."""

    where: str  # what keeps the locks, for messages (a URL without its password)

    def create(self, uri: str, absent: Callable[[], bool], write: Callable[[], None]) -> bool:
        """Under the lock of ``uri``: ``write()`` it if ``absent()``; True if this call did."""
        ...


_KEPT: dict[str, CreateLocks] = {}
_LOCK = threading.Lock()


def keep_creates(s3: S3Settings, locks: CreateLocks) -> None:
    """Make every exclusive create on the store of ``s3`` in this process go through
    ``locks``."""
    with _LOCK:
        _KEPT[store_name(s3)] = locks


def kept_creates(s3: S3Settings) -> CreateLocks | None:
    with _LOCK:
        return _KEPT.get(store_name(s3))


def forget() -> None:
    """Forget the locks kept for every store (tests)."""
    with _LOCK:
        _KEPT.clear()


def require_conditional_writes(root: str, s3: S3Settings) -> None:
    """The store under the ``s3://`` folder ``root`` honours ``If-None-Match: *`` (probed once
    per process), else `StoreLacks`: nothing may be created on it exclusively."""
    found = root_features(root, s3)
    if found.conditional_writes is not None:
        raise StoreLacks(refusal("The storage root", root, found, reads=False))


def put_if_absent(fs: Any, path: str, data: bytes) -> bool:
    """PutObject with ``If-None-Match: *``: True if created, False if the key already existed.

    A 412 after a retried request may be our own first write landing: the stored bytes decide
    (callers put a unique token in ``data``). A 409 (a concurrent conditional write in flight)
    is retried.
    """
    bucket, _, key = path.partition("/")
    for attempt in range(5):
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except FileExistsError:
            pass
        except OSError as exc:
            code = error_code(exc)
            if code == "ConditionalRequestConflict":
                time.sleep(0.1 * (attempt + 1))
                continue
            if code != "PreconditionFailed":
                raise StorageError(f"s3://{path}: conditional create failed: {exc}") from exc
        with fs.open(path, "rb") as handle:
            return bool(handle.read() == data)
    raise StorageError(f"s3://{path}: conditional create kept conflicting; try again")
