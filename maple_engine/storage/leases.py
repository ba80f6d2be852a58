"""Leases under the storage root: one holder at a time, across processes and machines.

A lease is a folder of numbered records, ``<folder>/00000001.json``, ``00000002.json``, ...
The highest number is the current lease. Taking the lease means creating the next number with
`Storage.create_exclusive` (an exclusive local create, or an S3 PutObject with
``If-None-Match: *``), so of several processes racing for it exactly one wins, including when
they race to take over a stale lease.

The holder records where it runs (host, pid, what) and since when, and beats (rewrites its
record) every ``ttl_s / 4`` seconds while it holds the lease. A lease is free when its holder
released it, when its holder ran on this host and that process is gone, or when its record was
last written more than ``ttl_s`` ago. That age is read on the storage's own clock (S3's
``Last-Modified`` against its ``Date``; a local file's mtime), so hosts whose clocks disagree
still agree on when a lease lapsed; a host whose clock is more than a quarter of the TTL off the
storage's is refused before it takes a lease (`maple_engine.storage.clock`).
"""

import contextlib
import dataclasses
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from maple_engine.errors import StorageError
from maple_engine.settings import knob
from maple_engine.storage import clock
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
    """Who holds a lease: host, pid, what it is doing, since when, last beat (epoch seconds on
    the holder's clock), and ``age``: seconds since its record was written, on the storage's."""

    host: str
    pid: int
    what: str
    since: float
    beat: float
    token: str
    released: bool = False
    age: float = dataclasses.field(default=0.0, compare=False)

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.since, UTC).isoformat(timespec="seconds")
        return f"{self.what} (pid {self.pid} on {self.host}, since {since})"

    def stale(self, ttl_s: float) -> bool:
        if self.released:
            return True
        if self.host == socket.gethostname() and not pid_alive(self.pid):
            return True
        return self.age > ttl_s


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
        generation = int(key.rsplit("/", 1)[-1].split(".")[0])
        try:
            data = self.storage.read_json(key)
            age = self.storage.age(key)
        except (StorageError, orjson.JSONDecodeError):  # unreadable: not free, look again later
            return generation, None
        data.pop("age", None)
        return generation, Holder(**data, age=age)

    def holder(self) -> Holder | None:
        """The live holder, or None when the lease is free."""
        _, holder = self.current()
        return None if holder is None or holder.stale(self.ttl_s) else holder

    def acquire(self) -> bool:
        """Take the lease if it is free; True if this process now holds it."""
        generation, holder = self.current()
        if generation and (holder is None or not holder.stale(self.ttl_s)):
            return False
        self.check_clock()
        now = clock.now()
        mine = Holder(socket.gethostname(), os.getpid(), self.what, now, now, uuid.uuid4().hex)
        if not self.storage.create_exclusive(self._key(generation + 1), _encode(mine)):
            return False
        self.generation, self._holder = generation + 1, mine
        return True

    def check_clock(self) -> None:
        """Refuse to take the lease when this host's clock is too far off the storage's (to
        within the storage clock's resolution, the round trip and a tenth of a second)."""
        before = clock.now()
        server = self.storage.server_time() + self.storage.clock_resolution / 2
        after = clock.now()
        slack = self.storage.clock_resolution / 2 + (after - before) / 2 + 0.1
        clock.check_skew((before + after) / 2, server, self.ttl_s, self.storage.root, slack)

    @property
    def taken_over(self) -> bool:
        """True when this process holds a lease someone held before (maybe a dead process)."""
        return self.generation > 1

    def beat(self) -> None:
        if self._holder is not None:
            self._holder = dataclasses.replace(self._holder, beat=clock.now())
            self.storage.write_bytes(self._key(self.generation), _encode(self._holder))

    def release(self) -> None:
        if self._holder is not None:
            done = dataclasses.replace(self._holder, beat=clock.now(), released=True)
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
    del data["age"]  # read from the storage's clock, never written
    return orjson.dumps(data)
