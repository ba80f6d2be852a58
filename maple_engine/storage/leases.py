"""Leases under the storage root: one holder at a time, across processes and machines.

A lease is a folder of numbered records, ``<folder>/00000001.json``, ``00000002.json``, ...
The highest number is the current lease. Taking the lease means creating the next number with
`Storage.create_exclusive` (an exclusive local create, or an S3 PutObject with
``If-None-Match: *``), so of several processes racing for it exactly one wins, including when
they race to take over a stale lease.

The holder records where it runs (host, pid, what) and since when, and beats (rewrites its
record's ``beat`` time) every ``ttl_s / 4`` seconds while it holds the lease. A lease is free
when its holder released it, when its holder ran on this host and that process is gone, or when
its last beat is older than ``ttl_s`` (a holder on another machine that died or lost the
network). Clocks of machines sharing a root are assumed to agree within a fraction of the TTL.
"""

import contextlib
import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from maple_engine.errors import StorageError
from maple_engine.settings import knob
from maple_engine.storage.layout import join
from maple_engine.storage.storage import Storage

TTL_ENV = "MAPLE_LEASE_TTL_S"  # a `maple_engine.settings` knob
DEFAULT_TTL_S = 120.0


def default_ttl() -> float:
    return float(knob(TTL_ENV) or DEFAULT_TTL_S)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs on this machine and is not a zombie awaiting its parent's wait."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a lease: host, pid, what it is doing, since when, last beat (epoch seconds)."""

    host: str
    pid: int
    what: str
    since: float
    beat: float
    token: str
    released: bool = False

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.since, UTC).isoformat(timespec="seconds")
        return f"{self.what} (pid {self.pid} on {self.host}, since {since})"

    def stale(self, ttl_s: float, now: float | None = None) -> bool:
        if self.released:
            return True
        if self.host == socket.gethostname() and not pid_alive(self.pid):
            return True
        return (now or time.time()) - self.beat > ttl_s


class Lease:
    """A lease on ``folder`` of ``storage``; `acquire` it, then `hold` it while working."""

    def __init__(self, storage: Storage, folder: str, what: str, ttl_s: float | None = None):
        self.storage = storage
        self.folder = folder
        self.what = what
        self.ttl_s = ttl_s if ttl_s is not None else default_ttl()
        self.generation = 0  # the record this process holds (0: none)
        self._holder: Holder | None = None

    def current(self) -> tuple[int, Holder | None]:
        """The highest record number and its holder (0, None when never taken)."""
        keys = [k for k in self.storage.list_keys(self.folder) if k.endswith(".json")]
        if not keys:
            return 0, None
        key = keys[-1]
        try:
            data = self.storage.read_json(key)
        except (StorageError, orjson.JSONDecodeError):  # unreadable: not free, look again later
            return int(key.rsplit("/", 1)[-1].split(".")[0]), None
        return int(key.rsplit("/", 1)[-1].split(".")[0]), Holder(**data)

    def holder(self) -> Holder | None:
        """The live holder, or None when the lease is free."""
        _, holder = self.current()
        return None if holder is None or holder.stale(self.ttl_s) else holder

    def acquire(self) -> bool:
        """Take the lease if it is free; True if this process now holds it."""
        generation, holder = self.current()
        if generation and (holder is None or not holder.stale(self.ttl_s)):
            return False
        now = time.time()
        mine = Holder(socket.gethostname(), os.getpid(), self.what, now, now, uuid.uuid4().hex)
        if not self.storage.create_exclusive(self._key(generation + 1), _encode(mine)):
            return False
        self.generation, self._holder = generation + 1, mine
        return True

    @property
    def taken_over(self) -> bool:
        """True when this process holds a lease someone held before (maybe a dead process)."""
        return self.generation > 1

    def beat(self) -> None:
        if self._holder is not None:
            self._holder = dataclasses.replace(self._holder, beat=time.time())
            self.storage.write_bytes(self._key(self.generation), _encode(self._holder))

    def release(self) -> None:
        if self._holder is not None:
            done = dataclasses.replace(self._holder, beat=time.time(), released=True)
            self.storage.write_bytes(self._key(self.generation), _encode(done))
            self._holder = None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Beat in a background thread while the body runs; release at the end."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.ttl_s / 4):
                with contextlib.suppress(Exception):  # a missed beat is retried next period
                    self.beat()

        thread = threading.Thread(target=beat, name=f"lease {self.folder}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.release()

    def _key(self, generation: int) -> str:
        return join(self.folder, f"{generation:08d}.json")


def _encode(holder: Holder) -> bytes:
    data: dict[str, Any] = dataclasses.asdict(holder)
    return orjson.dumps(data)
