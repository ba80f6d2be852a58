"""Requests' start slots, booked a group at a time and released together at each grid point.

Each request waiting to go puts itself in a queue. One booker task books the queued requests'
slots with the ``Pacer`` one after another in a single event-loop wake, as long as each slot is
within one send-grid step of now; it waits for the step of the first that is not before it
books the next, so that a stalled loop delays sends instead of releasing a burst of overdue
slots. The requests booked into one grid point are released together by one timer at that
point: the group wakes on one event-loop wake, instead of one wake to book and one to go for
each request. A request released after an answer paused the pacer (its window spent: remaining
0, a 429), or too late for its budgeted window (a stalled loop), books again, as a send paced
one by one would have waited.
"""

import asyncio
import collections
import time
from collections.abc import Callable

from maple_engine.send.pacing import Pacer

#: what a released request learns: its slot and whether it was within a window's budget, or
#: None when the job stopped before it was booked
Slot = tuple[float, bool] | None


class Turns:
    """The start slots of one attempt's requests (``tokens_of``: a request's estimated tokens
    from its raw estimate; ``halted``: the job stopped, the waiters leave without a slot)."""

    def __init__(
        self, pacer: Pacer, tokens_of: Callable[[int], float], halted: Callable[[], bool]
    ) -> None:
        self.pacer = pacer
        self.tokens_of = tokens_of
        self.halted = halted
        self._waiting: collections.deque[tuple[int, asyncio.Future[Slot]]] = collections.deque()
        self._booker: asyncio.Task[None] | None = None
        self._group: list[tuple[asyncio.Future[Slot], Slot]] = []
        self._group_at: float | None = None

    async def take(self, raw: int) -> None:
        """Wait for this request's start slot (``raw``: its raw token estimate)."""
        loop = asyncio.get_running_loop()
        while True:
            slot: asyncio.Future[Slot] = loop.create_future()
            self._waiting.append((raw, slot))
            if self._booker is None or self._booker.done():
                self._booker = loop.create_task(self._book())
            booked = await slot
            if booked is None:
                return
            go, budgeted = booked
            now = time.monotonic()
            if self.pacer.paused_until <= now and (not budgeted or self.pacer.in_time(go, now)):
                return
            # an answer paused the pacer (its window is spent) after this slot was booked: a
            # slot booked a step ahead must not go out into the spent window; book again

    async def _book(self) -> None:
        try:
            while self._waiting:
                raw, slot = self._waiting.popleft()
                if slot.done():  # its request was cancelled
                    continue
                if self.halted():
                    slot.set_result(None)
                    continue
                pacer, now, tokens = self.pacer, time.monotonic(), self.tokens_of(raw)
                # on the grid only while pacing to a known limit that no one else contests
                grid = pacer.known and pacer.calm(now)
                go = pacer.book(tokens, now, grid)
                self._release_at(go, slot, (go, pacer.budgeted))
                early = go - now - (pacer.step(tokens) if grid else 0.0)
                if early > 0:
                    await asyncio.sleep(early)
        except BaseException as error:
            while self._waiting:
                _, slot = self._waiting.popleft()
                if not slot.done():
                    slot.set_exception(error)
            raise

    def _release_at(self, go: float, slot: asyncio.Future[Slot], booked: Slot) -> None:
        """Release ``slot`` at ``go`` with the others booked for that moment (one timer)."""
        if go != self._group_at:
            self._group, self._group_at = [], go
            asyncio.get_running_loop().call_at(go, self._release, self._group)
        self._group.append((slot, booked))

    def _release(self, group: list[tuple[asyncio.Future[Slot], Slot]]) -> None:
        if group is self._group:  # released: a later booking for the same moment starts anew
            self._group_at = None
        for slot, booked in group:
            if not slot.done():
                slot.set_result(booked)
