"""Requests' start slots, booked a group at a time and released together at each grid point.

Each request waiting to go puts itself in a queue. One booker task books the queued requests'
slots with the ``Pacer`` one after another in a single event-loop wake, as long as each slot is
within one send-grid step of now; it waits for the step of the first that is not before it
books the next, so that a stalled loop delays sends instead of releasing a burst of overdue
slots. The requests booked into one grid point are released together by one timer at that
point: the group wakes on one event-loop wake, instead of one wake to book and one to go for
each request, and is told to ``going`` just before (the attempt's checkpoint log says the
group's requests sending in one line, before any of them goes). A request released after an
answer paused the pacer (its window spent: remaining 0, a 429), or too late for its budgeted
window (a stalled loop), is told to ``held_back`` and books again, as a send paced one by one
would have waited.
"""

import asyncio
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from maple_engine.send.pacing import Pacer

R = TypeVar("R")


@dataclass(slots=True)
class _Waiter(Generic[R]):
    """A request waiting for its turn: its raw token estimate, what it is (told to ``going``),
    its slot once booked (the moment and whether it was within a window's budget), and the
    future that wakes it (True: go; False: the job stopped before it was booked)."""

    raw: int
    request: R
    woken: asyncio.Future[bool]
    go: float = 0.0
    budgeted: bool = False


class Turns(Generic[R]):
    """The start slots of one attempt's requests (``tokens_of``: a request's estimated tokens
    from its raw estimate; ``halted``: the job stopped, the waiters leave without a slot;
    ``going``: told each released group's requests, just before they wake; ``held_back``: told
    a released request that books again instead of going)."""

    def __init__(
        self,
        pacer: Pacer,
        tokens_of: Callable[[int], float],
        halted: Callable[[], bool],
        going: Callable[[list[R]], None] = lambda requests: None,
        held_back: Callable[[R], None] = lambda request: None,
    ) -> None:
        self.pacer = pacer
        self.tokens_of = tokens_of
        self.halted = halted
        self.going = going
        self.held_back = held_back
        self._waiting: collections.deque[_Waiter[R]] = collections.deque()
        self._booker: asyncio.Task[None] | None = None
        self._group: list[_Waiter[R]] = []
        self._group_at: float | None = None

    async def take(self, raw: int, request: R) -> bool:
        """Wait for this request's start slot (``raw``: its raw token estimate); False: the job
        stopped before it was booked (it does not go)."""
        loop = asyncio.get_running_loop()
        while True:
            waiter = _Waiter(raw, request, loop.create_future())
            self._wait(waiter)
            if not await waiter.woken:
                return False
            now = time.monotonic()
            if self.pacer.paused_until <= now and (
                not waiter.budgeted or self.pacer.in_time(waiter.go, now)
            ):
                return True
            # an answer paused the pacer (its window is spent) after this slot was booked: a
            # slot booked a step ahead must not go out into the spent window; book again
            self.held_back(request)

    def _wait(self, waiter: _Waiter[R]) -> None:
        self._waiting.append(waiter)
        if self._booker is None or self._booker.done():
            self._booker = asyncio.get_running_loop().create_task(self._book())

    async def _book(self) -> None:
        try:
            while self._waiting:
                waiter = self._waiting.popleft()
                if waiter.woken.done():  # its request was cancelled
                    continue
                if self.halted():
                    waiter.woken.set_result(False)
                    continue
                pacer, now, tokens = self.pacer, time.monotonic(), self.tokens_of(waiter.raw)
                # on the grid only while pacing to a known limit that no one else contests
                grid = pacer.known and pacer.calm(now)
                waiter.go = pacer.book(tokens, now, grid)
                waiter.budgeted = pacer.budgeted
                self._release_at(waiter)
                early = waiter.go - now - (pacer.step(tokens) if grid else 0.0)
                if early > 0:
                    await asyncio.sleep(early)
        except BaseException as error:
            while self._waiting:
                waiter = self._waiting.popleft()
                if not waiter.woken.done():
                    waiter.woken.set_exception(error)
            raise

    def _release_at(self, waiter: _Waiter[R]) -> None:
        """Release ``waiter`` at its slot with the others booked for that moment (one timer)."""
        if waiter.go != self._group_at:
            self._group, self._group_at = [], waiter.go
            asyncio.get_running_loop().call_at(waiter.go, self._release, self._group)
        self._group.append(waiter)

    def _release(self, group: list[_Waiter[R]]) -> None:
        if group is self._group:  # released: a later booking for the same moment starts anew
            self._group_at = None
        going = [waiter for waiter in group if not waiter.woken.done()]  # not cancelled
        try:
            if going:
                self.going([waiter.request for waiter in going])
        except OSError as error:  # the log not written (a full disk): none of them goes
            for waiter in going:
                waiter.woken.set_exception(error)
            return
        for waiter in going:
            waiter.woken.set_result(True)
