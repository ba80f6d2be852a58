"""How many requests each short fixed rate-limit window holds, and when a window's requests go.

A provider that enforces a per-minute limit over fixed windows of a few seconds admits a
window's share at any point of the window. Evenly paced requests fill every window once the
pace runs, but not the window in which the limit is learned (the pace starts part-way through
it), nor a window in which the event loop stalled (paced sends take back one lost slot at
most), and the last window's requests spread over it. So once a window's length and edges are
known, each window has a budget: its share of requests, counted per window from this sender's
sends (each in the window it goes out in). A window's requests go at ``1 / STEADY`` times the
even pace, so that the budget is spent before the window's last ``END_SHARE`` (no send lands
near the edge, where a late one would count in the next window), and faster, up to
``1 / FAST`` times, when what is left of the budget would not fit in what is left of the
window at that pace (the learned window, a stall) or when what is left of the job fits in one
window (the last). A send that would overfill a window, or land in its last ``END_SHARE``, goes
at the start of the next one instead, ``START_GUARD_S`` after the learned edge. That edge is
never later than the provider's (the provider counted the request after it was sent) but may be
earlier by as long as the request took to reach it (more on a new connection): the guard
covers that.
"""

import collections
import math

FAST = 0.25
STEADY = 0.9
START_GUARD_S = 0.05  # more than a request takes to reach the provider, a new connection too
END_SHARE = 0.05
LONGEST_S = 5.0  # longer windows (minute buckets) are paced evenly, never budgeted
_PACES = (FAST, 0.5, 0.75)  # the faster paces, coarse so that the send grid's step stays put


class WindowBudget:
    """This sender's sends per learned window; places each new send in a window with room."""

    def __init__(self) -> None:
        self.start: float | None = None  # the window being booked, its length, its sends
        self.length = 0.0
        self.count = 0
        self.pace = STEADY  # this window's pace: quickened when behind, never slowed within it
        self.sent: collections.deque[float] = collections.deque(maxlen=4096)

    def place(
        self, moment: float, window: tuple[float, float], capacity: int, gap: float, ending: bool
    ) -> tuple[float, float]:
        """When this send goes (``moment``, or the next window's start) in windows of
        ``window`` = (a learned edge, the length), counted in its window; and the pace for the
        sends after it (the share of the even ``gap`` between them)."""
        edge, length = window
        start = edge + math.floor((moment - edge) / length) * length
        self._enter(start, length)
        if self.count >= capacity or moment > start + length * (1 - END_SHARE):
            start += length
            self._enter(start, length)
        moment = max(moment, start + START_GUARD_S)
        self.count += 1
        room = start + length * (1 - END_SHARE) - moment
        need = (capacity - self.count) * gap
        if ending:
            self.pace = FAST
        elif room < need * self.pace:  # behind: quicken for the rest of this window
            self.pace = max((p for p in _PACES if room >= need * p), default=FAST)
        return moment, self.pace

    def in_time(self, go: float, now: float, window: tuple[float, float]) -> bool:
        """Whether a send placed at ``go`` still leaves at ``now`` clear of its window's end
        (half of ``END_SHARE`` before it): a stalled loop may wake it later than that."""
        edge, length = window
        start = edge + math.floor((go - edge) / length) * length
        return now <= start + length * (1 - END_SHARE / 2)

    def _enter(self, start: float, length: float) -> None:
        """Book into the window from ``start``: a new one (or one of a newly learned length)
        counts the sends already in it."""
        same = self.start is not None and abs(start - self.start) < length / 2
        if same and length == self.length:
            return
        self.start, self.length, self.pace = start, length, STEADY
        self.count = sum(1 for sent in self.sent if start <= sent < start + length)
