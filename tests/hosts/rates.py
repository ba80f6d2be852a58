"""Measuring hosts that share one real-time rate limit: the emulator's counters (and, when the
share goes through the database, the live rows of ``rate_holders``) sampled every 0.1 s, and
the figures read from them: share of the limit, 429s, time for a dead sender's share to come
back. Used by the hosts tests and ``bench/hosts_rate_share.py``."""

import contextlib
import dataclasses
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import sqlalchemy as sa

from maple_engine.ledger.rate_holders import WINDOW_S, database_now, rate_holders

SAMPLE_S = 0.1


@contextlib.contextmanager
def emulator(rpm: int) -> Iterator[str]:
    """``maple emulator`` in a process of its own (the hosts' load does not slow its clock),
    enforcing ``rpm`` over one-second windows; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "maple_assets.cli", "emulator", "--port", str(port),
           "--rpm", str(rpm), "--burst-seconds", "1", "--batch-seconds", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/_emulator/stats", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the emulator did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float  # time.time()
    sent: int  # real-time requests the emulator answered
    refused: int  # ... with a 429
    billed: int
    holders: int  # live rows of rate_holders (0: no database)


class Sampler(threading.Thread):
    """Samples the emulator at ``url`` (and ``database``'s live holders) until ``stop``."""

    def __init__(self, url: str, database: str | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.engine = sa.create_engine(database) if database else None
        self.samples: list[Sample] = []

    def run(self) -> None:
        try:
            with httpx.Client(timeout=5) as http:
                while not self.stop.wait(SAMPLE_S):
                    s = http.get(f"{self.url}/_emulator/stats").json()
                    sent, refused = s["realtime_requests"], s["realtime_429"]
                    held = self._holders()
                    self.samples.append(
                        Sample(time.time(), sent, refused, s["requests_billed"], held)
                    )
        finally:
            if self.engine is not None:
                self.engine.dispose()

    def _holders(self) -> int:
        if self.engine is None:
            return 0
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("rate_holders"):
                return 0
            live = rate_holders.c.beat_at > database_now(conn) - WINDOW_S
            return int(conn.execute(sa.select(sa.func.count()).where(live)).scalar_one())

    def finish(self) -> list[Sample]:
        time.sleep(3 * SAMPLE_S)
        self.close()
        return self.samples

    def close(self) -> None:
        self.stop.set()
        self.join()


def share(samples: list[Sample], rpm: int, start: float, end: float) -> float:
    """Requests billed from ``start`` to ``end`` as a share of the limit over that time."""
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2 or inside[-1].at - inside[0].at < 1.0:
        return float("nan")
    first, last = inside[0], inside[-1]
    return (last.billed - first.billed) / (rpm / 60 * (last.at - first.at))


def first_request(samples: list[Sample]) -> float:
    return next(s.at for s in samples if s.sent > 0)


def all_billed(samples: list[Sample], total: int) -> float:
    return next(s.at for s in samples if s.billed >= total)


def recovery(samples: list[Sample], rpm: int, after: float, level: float = 0.95) -> float:
    """Seconds from ``after`` until a whole second's billed requests reach ``level`` of the
    limit again (a dead sender's share taken up by the others)."""
    for i, s in enumerate(samples):
        if s.at < after + 1.0:
            continue
        back = next(p for p in samples[: i + 1] if p.at >= s.at - 1.0)
        if (
            s.at - back.at >= 0.5
            and (s.billed - back.billed) / (s.at - back.at) >= level * rpm / 60
        ):
            return s.at - after
    return float("inf")


def wait_for_holders(sampler: Sampler, count: int, timeout: float, story: str = "") -> float:
    """When ``count`` senders first held a share (``time.time()``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for s in sampler.samples[-5:]:
            if s.holders >= count:
                return s.at
        time.sleep(SAMPLE_S)
    raise AssertionError(f"{count} senders never held a share in {timeout} s\n{story[-3000:]}")


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))
