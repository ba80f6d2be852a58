"""Durable checkpoints of a real-time attempt's finished rows.

Layout under the storage root, per shard attempt (``prefix`` = ``<job>/state/<shard>/rt-<n>``)::

    chunk-00001.parquet   finished rows (RESULT_SCHEMA), written atomically every
                          ``every_rows`` rows or ``every_s`` seconds; on a local root, whose
                          log already holds every row, every ``logged_rows`` rows or
                          ``logged_s`` seconds at the most often
    wal-00002.jsonl       (local roots only) the rows finished since the last chunk, one JSON
                          line each; before the requests of a group go, one
                          ``{"sending": [custom ids]}`` line (``{"unbilled": [...]}`` when a
                          request is answered with an error, or did not go after all)
    lost-00002.json       the sends a killed run made whose answers it never recorded:
                          ``{custom_id: count}``, derived from a leftover log's lines

The log is written to the operating system (no fsync: a SIGKILL, not a power cut) with one
``write`` per group of lines: a ``sending`` line goes out at once with the lines waiting before it;
an answer's line waits only for the end of the event-loop step it finished in, so that the answers
finished in one step share a write, made before the loop waits on anything (outside an event loop,
at once). A SIGKILL therefore loses only requests in flight: a finished row is in the log before
the next request starts. Those requests were answered and billed, so they are sent again and billed
twice; the log's ``sending`` lines tell which, and the attempt's cost entry books them at the usage
of the answer that replaced them (``lost()``), so the ledger keeps the provider's bill. On an S3
root there is no append, so rows finished since the last chunk (at most ``every_s`` seconds' worth)
are sent again after a crash, unknown to the ledger. Opening the store compacts leftover logs into
chunks first; reads dedupe by ``custom_id`` (first wins).
"""

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterable
from typing import IO, Any

import orjson
import polars as pl

from maple_engine.providers.base import RESULT_SCHEMA, result_frame
from maple_engine.storage.layout import join
from maple_engine.storage.storage import Storage

_CHUNK, _WAL, _LOST = "chunk-", "wal-", "lost-"
_SENDING, _UNBILLED = "sending", "unbilled"
LOGGED_ROWS, LOGGED_S = 5000, 30.0  # a local root's chunks: its log keeps each row at once


def _number(key: str) -> int:
    name = key.rsplit("/", 1)[-1]
    return int(name.split("-")[1].split(".", 1)[0])


class RowCheckpoints:
    def __init__(
        self,
        storage: Storage,
        prefix: str,
        every_rows: int = 200,
        every_s: float = 2.0,
        *,
        logged_rows: int = LOGGED_ROWS,
        logged_s: float = LOGGED_S,
    ) -> None:
        self.storage = storage
        self.prefix = prefix
        logged = not storage.remote  # the log keeps each row: chunks only compact it
        self.every_rows = max(every_rows, logged_rows) if logged else every_rows
        self.every_s = max(every_s, logged_s) if logged else every_s
        self._buffer: list[dict[str, Any]] = []
        self._next = 1
        self._wal: IO[bytes] | None = None
        self._lines: list[bytes] = []  # log lines not yet written
        self._write_soon = False  # a write of ``_lines`` is due at the end of this loop step
        self._last_flush = time.monotonic()
        self._in_flight: Counter[str] = Counter()  # sends told by `sending`, not yet answered

    # -- reading ----------------------------------------------------------------------------
    def _keys(self, kind: str) -> list[str]:
        return [
            k
            for k in self.storage.list_keys(self.prefix)
            if k.rsplit("/", 1)[-1].startswith(kind) and not k.endswith(".tmp")
        ]

    def _wal_path(self, number: int) -> str | None:
        if self.storage.remote:
            return None
        return os.path.join(self.storage.root, self.prefix, f"{_WAL}{number:05d}.jsonl")

    def _wal_lines(self, key: str) -> list[dict[str, Any]]:
        lines = []
        for line in self.storage.read_bytes(key).splitlines():
            try:
                lines.append(orjson.loads(line))
            except orjson.JSONDecodeError:  # the line a crash cut short
                continue
        return lines

    def _wal_rows(self, key: str) -> list[dict[str, Any]]:
        return [line for line in self._wal_lines(key) if "custom_id" in line]

    def lost(self) -> dict[str, int]:
        """Sends a killed run made whose answers it never recorded, by custom id."""
        total: Counter[str] = Counter()
        for key in self._keys(_LOST):
            total.update(self.storage.read_json(key))
        return dict(total)

    def load(self) -> pl.DataFrame:
        """Every finished row (chunks and logs), one per ``custom_id``, in RESULT_SCHEMA."""
        frames = [self.storage.read_parquet(k) for k in self._keys(_CHUNK)]
        logged = [row for k in self._keys(_WAL) for row in self._wal_rows(k)]
        frames.append(_frame(logged))
        # a chunk or log line written before a column was added to RESULT_SCHEMA lacks it: null
        # there (the log rows' frame has every column), so an older run's ``resendable`` reads
        # as null and its failure class's retries decide
        every = pl.concat(frames, how="diagonal_relaxed").select(RESULT_SCHEMA.keys())
        return every.unique(subset="custom_id", keep="first", maintain_order=True)

    def count(self) -> int:
        return self.load().height

    # -- writing ----------------------------------------------------------------------------
    def open(self) -> pl.DataFrame:
        """Compact leftover logs into chunks (and the sends they name that were never answered
        into a ``lost`` record), start a new log; returns the finished rows (an earlier run's,
        which this one carries: ``custom_id`` and ``batch_id``)."""
        for key in self._keys(_WAL):
            number = _number(key)
            chunk = join(self.prefix, f"{_CHUNK}{number:05d}.parquet")
            lines = self._wal_lines(key)
            rows = [line for line in lines if "custom_id" in line]
            if rows and not self.storage.exists(chunk):
                self.storage.write_parquet(chunk, _frame(rows))
            lost = _unanswered(lines)
            if lost:
                self.storage.write_json(join(self.prefix, f"{_LOST}{number:05d}.json"), lost)
            self.storage.delete(key)
        numbers = [_number(k) for k in (*self._keys(_CHUNK), *self._keys(_LOST))]
        self._next = max(numbers, default=0) + 1  # a log's number is never used twice
        self._open_wal()
        return self.load().select("custom_id", "batch_id")

    @property
    def number(self) -> int:
        """The number of the chunk this run writes next (each run's first is a new one)."""
        return self._next

    def _open_wal(self) -> None:
        path = self._wal_path(self._next)
        if path is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._wal = open(path, "ab", buffering=0)  # noqa: SIM115  (closed in flush/close)
            if self._in_flight:  # the requests still in flight, told again in the new log
                self._wal.write(orjson.dumps({_SENDING: list(self._in_flight.elements())}) + b"\n")

    def sending(self, custom_ids: Iterable[str]) -> None:
        """Requests for ``custom_ids`` are about to go (written at once with the lines waiting,
        so a kill leaves them known)."""
        ids = list(custom_ids)
        self._in_flight.update(ids)
        if self._wal is not None:
            self._lines.append(orjson.dumps({_SENDING: ids}) + b"\n")
            self.write_log()

    def unbilled(self, custom_ids: Iterable[str]) -> None:
        """The request told by ``sending`` was answered with an error, or did not go after all
        (nothing billed)."""
        ids = list(custom_ids)
        self._answered(ids)
        self._log({_UNBILLED: ids})

    def _log(self, line: dict[str, Any]) -> None:
        """Write ``line`` with the others of this event-loop step, at its end (at once outside
        an event loop)."""
        if self._wal is None:
            return
        self._lines.append(orjson.dumps(line) + b"\n")
        if self._write_soon:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_log()
            return
        loop.call_soon(self.write_log)
        self._write_soon = True

    def write_log(self) -> None:
        """Write the waiting log lines in one ``write``."""
        self._write_soon = False
        if self._lines and self._wal is not None:
            self._wal.write(b"".join(self._lines))
        self._lines = []

    def _answered(self, ids: Iterable[str]) -> None:
        for custom_id in ids:
            if self._in_flight[custom_id] > 1:
                self._in_flight[custom_id] -= 1
            else:
                self._in_flight.pop(custom_id, None)

    def add(self, row: dict[str, Any]) -> None:
        self._buffer.append(row)
        self._answered([row["custom_id"]])
        self._log(row)
        if len(self._buffer) >= self.every_rows:
            self.flush()

    def due(self) -> bool:
        return bool(self._buffer) and time.monotonic() - self._last_flush >= self.every_s

    def flush(self) -> None:
        """Write the buffered rows as the next chunk, then retire the log they were in."""
        self._last_flush = time.monotonic()
        self.write_log()  # the log complete before the chunk: a kill between them loses nothing
        if not self._buffer:
            return
        self.storage.write_parquet(
            join(self.prefix, f"{_CHUNK}{self._next:05d}.parquet"), _frame(self._buffer)
        )
        self._buffer = []
        self._close_wal(delete=True)
        self._next += 1
        self._open_wal()

    def _close_wal(self, delete: bool) -> None:
        if self._wal is None:
            return
        self._wal.close()
        self._wal = None
        path = self._wal_path(self._next)
        if delete and path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def close(self) -> None:
        """Flush; sends answered but never recorded (rows held back, then dropped: a job error
        or a stop) are kept as ``lost``, as a kill's would be."""
        self.flush()
        if self._in_flight:
            lost = join(self.prefix, f"{_LOST}{self._next:05d}-dropped.json")
            self.storage.write_json(lost, dict(self._in_flight))
            self._in_flight.clear()
        self._close_wal(delete=True)


def _unanswered(lines: list[dict[str, Any]]) -> dict[str, int]:
    """The sends a log's lines name that neither a row nor an ``unbilled`` line answered."""
    pending: Counter[str] = Counter()
    for line in lines:
        answered = [line["custom_id"]] if "custom_id" in line else line.get(_UNBILLED, ())
        pending.update(line.get(_SENDING, ()))
        pending.subtract(custom_id for custom_id in answered if pending[custom_id] > 0)
    return {custom_id: count for custom_id, count in pending.items() if count > 0}


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return result_frame({name: [row.get(name) for row in rows] for name in RESULT_SCHEMA})
