"""``maple enrich``'s progress: shards, rows, rate, time left and spend so far.

On a terminal a ``rich`` progress bar redrawn in place; otherwise (a log file, a CI job, a pipe)
a plain line whenever a figure changes (at least once a minute), so logs stay readable.
"""

import dataclasses
import sys
import time
from typing import Any

PLAIN_EVERY_S = 60.0


@dataclasses.dataclass
class Counts:
    """Where the job stands, as the driver last read it from the job's state."""

    total_shards: int = 0
    submitted: int = 0
    finished: int = 0
    total_rows: int = 0
    rows_done: int = 0
    spent_usd: float = 0.0
    #: the expected finish, p50 and p90 (epoch seconds; None: unknown), `maple_engine.submit.eta`
    eta_p50: float | None = None
    eta_p90: float | None = None


class Progress:
    """Shows ``Counts`` as they change; ``close()`` when the job ends."""

    def __init__(self, quiet: bool = False, terminal: bool | None = None) -> None:
        self.quiet = quiet
        self.counts = Counts()
        self.started = time.monotonic()
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self._bar: Any = None
        self._task: Any = None
        self._printed: tuple[Counts, float] | None = None  # plain mode: what, and when

    def show(self) -> None:
        if self.quiet:
            return
        if self.terminal:
            self._draw()
            return
        now = time.monotonic()
        if self._printed is not None:
            counts, at = self._printed
            same = dataclasses.replace(counts, eta_p50=None, eta_p90=None) == dataclasses.replace(
                self.counts, eta_p50=None, eta_p90=None
            )
            if same and now - at < PLAIN_EVERY_S:
                return  # nothing new: a log gets a line per change, or one a minute
        self._printed = (dataclasses.replace(self.counts), now)
        print(self.line(), file=sys.stderr, flush=True)

    def _rate(self) -> tuple[float, float]:
        """Seconds since the start, and rows done per second."""
        elapsed = time.monotonic() - self.started
        return elapsed, self.counts.rows_done / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        c = self.counts
        elapsed, rate = self._rate()
        left = (c.total_rows - c.rows_done) / rate if rate > 0 else None
        eta = (
            f"  left ~{_duration(left)}" if left is not None and c.rows_done < c.total_rows else ""
        )
        return (
            f"shards submitted {c.submitted}/{c.total_shards}  finished "
            f"{c.finished}/{c.total_shards}  rows done {c.rows_done:,}/{c.total_rows:,}  "
            f"{rate:,.0f} rows/s{eta}{self._expected()}  spent {c.spent_usd:.6f} USD  "
            f"{elapsed:6.1f}s"
        )

    def _expected(self) -> str:
        """``  finish p50 ~1m05s p90 ~2m10s``: the ETA from the batch history, if known."""
        c = self.counts
        if c.eta_p50 is None or c.eta_p90 is None:
            return ""
        now = time.time()
        p50, p90 = max(0.0, c.eta_p50 - now), max(0.0, c.eta_p90 - now)
        return f"  finish p50 ~{_duration(p50)} p90 ~{_duration(p90)}"

    def _draw(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import (
            Progress as Bar,
        )

        c = self.counts
        if self._bar is None:
            self._bar = Bar(
                TextColumn("rows"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("shards {task.fields[shards]}"),
                TextColumn("{task.fields[finish]}"),
                TextColumn("spent {task.fields[spent]}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._task = self._bar.add_task(
                "rows", total=c.total_rows or None, rate="", shards="", spent="", finish=""
            )
        _, rate = self._rate()
        self._bar.update(
            self._task,
            total=c.total_rows or None,
            completed=c.rows_done,
            rate=f"{rate:,.0f} rows/s",
            shards=f"{c.finished}/{c.total_shards} done, {c.submitted} sent",
            spent=f"{c.spent_usd:.6f} USD",
            finish=self._expected().strip(),
        )
        if not self._bar.live.is_started:
            self._bar.start()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
