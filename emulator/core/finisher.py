"""A background thread that runs batch processing when a batch's end time arrives.

Observing a batch (GET) also processes it, so the finisher is only an optimisation: it overlaps
batch processing with the client's next uploads instead of doing it on the first poll.
"""

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Finisher:
    """Runs callbacks at (or soon after) their due time on one daemon thread."""

    def __init__(self) -> None:
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="emulator-finisher", daemon=True)
        self._thread.start()

    def schedule(self, due: float, job: Callable[[], None]) -> None:
        """Run ``job`` once ``time.time() >= due``."""
        with self._wake:
            heapq.heappush(self._queue, (due, next(self._order), job))
            self._wake.notify()

    def clear(self) -> None:
        """Drop the pending jobs (their batches were forgotten)."""
        with self._wake:
            self._queue.clear()

    def stop(self) -> None:
        """Stop the thread; pending jobs are dropped (observation still processes batches)."""
        with self._wake:
            self._stopped = True
            self._queue.clear()
            self._wake.notify()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (not self._queue or self._queue[0][0] > time.time()):
                    timeout = self._queue[0][0] - time.time() if self._queue else None
                    self._wake.wait(timeout)
                if self._stopped:
                    return
                _, _, job = heapq.heappop(self._queue)
            try:
                job()
            except Exception:  # the thread's boundary: log, keep serving; a GET will retry
                logger.exception("emulator background batch processing failed")
