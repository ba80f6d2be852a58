"""Client-side rate limiting for the real-time providers, learned from response headers.

- The limits themselves come from each provider's own reading of its answers' headers
  (`maple_engine.providers.realtime.RateLimits`, ``read_limits`` in each provider's folder).
- ``Pacer`` spaces request starts evenly so that both requests and estimated tokens stay at a
  safety share of RPM and TPM. It grants no bursts: providers enforce limits over short windows,
  and a burst at a window edge is what turns into 429s. Once a short window is known (and this
  sender is alone and calm), each window's requests are budgeted instead (``window_budget``):
  a whole window's share, spent a little ahead of the even pace and faster in the window the
  limit was learned in, after a stall, and at the end of the job.
- ``WindowClock`` learns whether the provider's limiter has fixed windows at all (their resets
  point at one edge while the window lasts; a continuous token bucket's move on with every send,
  and a bucket is paced evenly), where they end from the reset headers (and their length from
  two edges, or from the step of the remaining count), so that the pacer keeps sends
  a few milliseconds clear of each edge: a send that lands just across an edge is what puts one
  request too many in a window when pacing at 99.9% of the limit.
- ``TokenEstimator`` calibrates the offline token estimate against the usage the provider bills.
- ``Gate`` bounds the requests in flight; its limit adapts (start small, grow to what the learned
  rate needs at the observed latency, halve on a rate-limit 429 when no limits are known).
- ``CapacityProbe`` sets that bound where no limits are known (a server a team runs has a
  throughput knee, not a rate limit): a hill climb on answers per second.
"""

import asyncio
import bisect
import collections
import itertools
import math

from maple_engine.providers.realtime import RateLimits
from maple_engine.send.bucket_level import BucketLevel
from maple_engine.send.window_budget import LONGEST_S, WindowBudget

SAFETY = 0.999
EDGE_GUARD_S = 0.004
#: sends go out on a grid of at most this step: the requests whose slots fall in one step leave
#: together, one event-loop wake for several requests (paced one by one, each costs a wake)
SEND_STEP_S = 0.2
#: ... and at most this many requests per grid point at the learned limit: a group is in flight
#: at once, and a crash then leaves up to a group answered but unrecorded (billed again on resume)
GROUP_MAX = 5
CALM_S = 10.0  # after a 429, sends go one by one for this long
#: windows are budgeted only while requests, not tokens, bind: the tokens the requests of a
#: full window carry stay under this share of the window's tokens
TOKEN_HEADROOM = 0.9
MIN_FACTOR = 0.5
#: a window is judged fixed or not from the estimates of sends at least this far apart in it ...
STILL_S = 0.2
#: ... which, for a fixed window, spread over at most half that time or this (counted late)
STILL_SPREAD_S = 0.1


class WindowClock:
    """Where the provider's short fixed windows end, learned from reset headers, once the
    headers show that the provider has fixed windows at all.

    A response to a request sent at ``sent_at`` whose window resets in ``reset`` seconds puts
    the edge at or after ``sent_at + reset`` (the server counted it after it was sent); the
    latest such estimate within one window is the tightest. Two successive edges give the
    window length. Resets over 5 s (minute buckets) teach nothing here.

    A continuous token bucket has no edges: its reset is the time until it is full again, so
    ``sent_at + reset`` moves on with every send, where a fixed window's stays put while the
    window lasts. The edges and length are believed (``fixed``) only once the estimates of
    requests sent ``STILL_S`` or more apart within one window agree, spread over no more than
    half the time between those sends (nor ``STILL_SPREAD_S``: a request counted late puts its
    estimate early); estimates that move on with the sends say the limiter is a bucket, and
    the pacer then paces evenly."""

    def __init__(self) -> None:
        self._edge: float | None = None
        self._length: float | None = None
        self.longest_reset = 0.0
        self.fixed = False  # the last window judged stood still: the limiter has fixed windows
        self.bucket = False  # ... or moved on with its sends: a continuous bucket
        self._left: list[int] = []  # the remaining counts seen in the current window, sorted
        self._counted: float | None = None  # the length those counts give
        self._spaced: float | None = None  # the length successive edges give
        # this window's estimates: the earliest and latest send, the lowest estimate
        self._sent = (0.0, 0.0)
        self._low = 0.0

    @property
    def edge(self) -> float | None:
        return self._edge if self.fixed else None

    @property
    def length(self) -> float | None:
        return self._length if self.fixed else None

    def observe(self, sent_at: float, reset: float | None, remaining: int | None = None) -> None:
        if reset is None or not 0 < reset <= 5.0:
            return
        self.longest_reset = max(self.longest_reset, reset)
        edge = sent_at + reset
        if remaining is not None:
            self._length_from(edge, remaining)
        # A late-counted request's estimate falls short by its delay (tens of ms on a busy
        # machine); the next window's edge is at least half a window further on.
        apart = max(0.25, 0.5 * self.longest_reset)
        if self._edge is None or edge > self._edge + apart:  # the first, the next (or later)
            if self._edge is not None:
                step = edge - self._edge
                self._spaced = step if self._spaced is None else min(self._spaced, step)
            self._edge, self._sent, self._low = edge, (sent_at, sent_at), edge
        elif edge > self._edge - apart:
            self._edge = max(self._edge, edge)
            self._low = min(self._low, edge)
            self._sent = (min(self._sent[0], sent_at), max(self._sent[1], sent_at))
            self._judge()
        self._length = self._counted or self._spaced

    def _judge(self) -> None:
        """Whether this window's estimates stood still while its sends went on (a fixed
        window) or moved on with them (a bucket); undecided until ``STILL_S`` of sends."""
        span = self._sent[1] - self._sent[0]
        if span >= STILL_S - 1e-9 and self._edge is not None:
            self.fixed = self._edge - self._low <= max(span / 2, STILL_SPREAD_S)
            self.bucket = not self.fixed

    def _length_from(self, edge: float, remaining: int) -> None:
        """The window's length, also before a second edge is seen, from the remaining count: a
        window of S seconds reports what is left of it per minute (left x 60 / S), so that one
        request takes 60 / S off it, as two consecutive admissions in one window show. Until
        two such are seen the step looks k times larger (k - 1 admissions in between), which
        gives S / k: windows that divide the real ones, so nothing overfills them meanwhile.
        A step of 1 is a minute's count (left to the edges)."""
        if self._edge is not None and abs(edge - self._edge) > max(0.25, 0.5 * self.longest_reset):
            self._left.clear()  # another window: its counts start again
        at = bisect.bisect_left(self._left, remaining)
        if at < len(self._left) and self._left[at] == remaining:
            return
        self._left.insert(at, remaining)
        near = self._left[max(0, at - 1) : at + 2]  # the new count and its neighbours
        step = min((b - a for a, b in itertools.pairwise(near)), default=0)
        if step > 1 and self.longest_reset <= 60 / step <= LONGEST_S:
            self._counted = max(self._counted or 0.0, 60 / step)

    def on_grid(self, moment: float, step: float) -> float:
        """The first point of a ``step`` grid at or after ``moment``. With the windows learned
        the grid sits half a step off their edges and ``step`` divides their length, so a send
        is never near an edge; and as each window then takes the slots of exactly one window
        length, rounding up never adds a request to a window."""
        origin = 0.0 if self.edge is None else self.edge + step / 2
        return origin + math.ceil((moment - origin) / step - 1e-9) * step

    def clear_of_edges(self, moment: float) -> float:
        """``moment``, or just after the nearest window edge when it falls within the guard."""
        if self.edge is None or self.length is None:
            return moment
        nearest = self.edge + round((moment - self.edge) / self.length) * self.length
        return nearest + EDGE_GUARD_S if abs(moment - nearest) < EDGE_GUARD_S else moment


class Pacer:
    """Even spacing of request starts at ``SAFETY`` x the (explicit or learned) RPM and TPM."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None) -> None:
        self.explicit = (rpm, tpm)
        self.rpm, self.tpm = rpm, tpm
        self.factor = SAFETY
        self.next_at = 0.0
        self.paused_until = 0.0
        self._slowed_at = -CALM_S - 1.0
        self.windows = WindowClock()
        self.senders = 1  # processes sharing the limit (``rate_shares``) ...
        self.rank = 0  # ... and this one's place among them (``request_share``)
        self._step: tuple[tuple[object, ...], float] | None = None
        self.budget = WindowBudget()
        self.left: int | None = None  # requests not yet booked (the engine's count)
        self.pace = 1.0  # the share of ``interval`` between sends: FAST in a fast window
        self.budgeted = False  # the last booking was within a window's budget
        self.level = BucketLevel()  # a continuous bucket's, learned from the headers
        self.booked = 0  # bookings in all

    @property
    def known(self) -> bool:
        return bool(self.rpm or self.tpm)

    def interval(self, tokens: float) -> float:
        """Seconds one request of ``tokens`` estimated tokens occupies at this sender's share of
        the target rates."""
        gap = 60.0 / (self.rpm * self.factor) / self.request_share() if self.rpm else 0.0
        if self.tpm:
            gap = max(gap, 60.0 * tokens / (self.tpm * self.factor) * self.senders)
        return gap

    def request_share(self) -> float:
        """This sender's share of the requests. 1/senders, unless a window of the limit is
        known: then a whole number of each window's requests, the senders ranked so that their
        numbers add up to the window's (40 a window among 3: 14, 13, 13). Evenly paced, a
        sender sends at most its number in any window, so together they never send more
        than the window holds; 1/3 each would send 14 now and then, and 42 in some windows."""
        if self.senders == 1:
            return 1.0
        per_window = (
            round(self.rpm * self.windows.length / 60) if self.rpm and self.windows.length else 0
        )
        if per_window < self.senders:
            return 1.0 / self.senders
        mine = per_window // self.senders + (self.rank < per_window % self.senders)
        return mine / per_window

    def reserve(self, tokens: float, now: float) -> float:
        """Book the next start slot; returns how long to wait for it.

        Callers reserve one at a time and at most one send-grid step ahead (the real-time
        engine's ``Turns``), so a stalled event loop delays sends instead of releasing a burst
        of overdue slots (a send that comes late may take back one slot it lost; on a
        continuous bucket, as many as the bucket holds beyond half of it, ``bucket_room``)."""
        gap = self.interval(tokens) * self.pace
        back = max(1.0, self.bucket_room(tokens, now))  # slots a late send may take back
        start = max(now - gap * back, self.next_at, self.paused_until)
        send = self.windows.clear_of_edges(max(start, now))
        if send > max(start, now):  # moved past a window edge: the schedule resumes from there
            start = send
        self.next_at = start + gap
        return max(0.0, send - now)

    def bucket_room(self, tokens: float, now: float) -> float:
        """Requests a continuous bucket holds now beyond half of it (``bucket_level``), while
        this sender is calm and alone and requests, not tokens, bind; else 0."""
        if not self.windows.bucket or not self.rpm or not self.calm(now):
            return 0.0
        if self.tpm and tokens * self.rpm > TOKEN_HEADROOM * self.tpm:
            return 0.0
        return self.level.room(now, self.booked)

    def step(self, tokens: float) -> float:
        """The send grid's step: at most ``SEND_STEP_S`` and ``GROUP_MAX`` requests at the
        paced rate (RPM, or TPM at ``tokens`` per request), and a whole fraction (a fifth or
        less) of a learned window. Kept while the limits and the window stay the same, so
        that it does not move from one booking to the next with each token estimate."""
        key = (self.rpm, self.tpm, self.windows.length, self.senders, self.rank, self.pace)
        if self._step is None or self._step[0] != key:
            step = min(SEND_STEP_S, GROUP_MAX * self.interval(tokens) * self.pace) or SEND_STEP_S
            length = self.windows.length
            if length is not None:
                step = length / max(5, math.ceil(length / step - 1e-9))
            self._step = (key, step)
        return self._step[1]

    def on_grid(self, moment: float, tokens: float) -> float:
        return self.windows.on_grid(moment, self.step(tokens))

    def book(self, tokens: float, now: float, grid: bool) -> float:
        """The moment the next send goes: its slot (``reserve``), on the send grid when
        ``grid``, and within a learned short window's budget (``window_budget``): at the
        next window's start when this one holds its share, the pace FAST in the first and
        last windows."""
        go = now + self.reserve(tokens, now)
        go = self.on_grid(go, tokens) if grid else go
        if self.left:
            self.left -= 1
        self.booked += 1
        capacity = self.window_capacity(tokens, now)
        self.budgeted = capacity is not None
        if capacity is not None:
            assert self.windows.edge is not None and self.windows.length is not None
            ending = self.left is not None and self.left <= capacity
            window = (self.windows.edge, self.windows.length)
            gap, was = self.interval(tokens), self.pace
            placed, self.pace = self.budget.place(go, window, capacity, gap, ending)
            if placed > go:  # moved on: the schedule resumes from there
                go = self.on_grid(placed, tokens) if grid else placed
                self.next_at = go + gap * self.pace
            else:  # the next slot at the new pace
                self.next_at += gap * (self.pace - was)
        else:
            self.pace = 1.0
        self.budget.sent.append(go)
        return go

    def in_time(self, go: float, now: float) -> bool:
        """Whether a send budgeted for ``go`` still goes out at ``now`` within its window."""
        if self.windows.edge is None or self.windows.length is None:
            return True
        return self.budget.in_time(go, now, (self.windows.edge, self.windows.length))

    def window_capacity(self, tokens: float, now: float) -> int | None:
        """Requests one learned short window holds (``tokens`` each), while this sender is
        calm and alone and the requests bind rather than the tokens; else None (even pace)."""
        length, rpm, tpm = self.windows.length, self.rpm, self.tpm
        if not rpm or length is None or self.windows.edge is None or length > LONGEST_S:
            return None
        if (tpm and tokens * rpm > TOKEN_HEADROOM * tpm) or not self.calm(now):
            return None
        return max(1, math.floor(rpm * length / 60 + 1e-9))

    def calm(self, now: float) -> bool:
        """Sends may go on the grid: one sender paces to the whole limit and none of its
        requests was refused in the last `CALM_S`. While another process shares the limit, or
        after a 429, they go one by one, each booking waiting for the one before, so that an
        answer saying the window is spent stops the very next send."""
        return self.senders == 1 and now - self._slowed_at > CALM_S

    def learn(self, limits: RateLimits, now: float, sent_at: float | None = None) -> None:
        if sent_at is not None:
            self.windows.observe(sent_at, limits.reset_requests, limits.remaining_requests)
            self.level.learn(limits, sent_at, self.budget.sent, self.booked)
        rpm, tpm, known = *self.explicit, self.known
        self.rpm = rpm or limits.rpm or self.rpm
        self.tpm = tpm or limits.tpm or self.tpm
        if self.known and not known and self.budget.sent:
            # the pace counts from the first send: the slots since, spent waiting for the first
            # answers, are behind it, for a bucket's level to take back (``reserve``)
            self.next_at = min(self.next_at, self.budget.sent[0])
        for left, reset in (
            (limits.remaining_requests, limits.reset_requests),
            (limits.remaining_tokens, limits.reset_tokens),
        ):
            if left == 0 and reset:  # counted from the admission, not from the answer's arrival
                self.pause(min(reset, 2.0), now if sent_at is None else sent_at)

    def pause(self, seconds: float, now: float) -> None:
        self.paused_until = max(self.paused_until, now + seconds)

    def slow_down(self, now: float) -> None:
        """A rate-limit 429: ease off by 3%, at most once a second (one 429 storm, one step)."""
        if now - self._slowed_at >= 1.0:
            self._slowed_at = now
            self.factor = max(MIN_FACTOR, self.factor * 0.97)

    def recover(self) -> None:
        self.factor = min(SAFETY, self.factor + 0.001)


class TokenEstimator:
    """Estimated tokens of a request: a line fitted to (raw offline estimate, billed usage).

    A straight line, not a ratio: a request's fixed framing (JSON keys, the system prompt, the
    reply) does not scale with its length, and a ratio then under-counts short requests."""

    def __init__(self, output_guess: int) -> None:
        self.output_guess = output_guess
        self.samples = 0
        self._sx = self._sy = self._sxx = self._sxy = 0.0

    def estimate(self, raw: int) -> float:
        if self.samples < 5 or self._sx <= 0:
            return float(raw + self.output_guess)
        n, mean_x, mean_y = self.samples, self._sx / self.samples, self._sy / self.samples
        spread = self._sxx - n * mean_x * mean_x
        if spread <= 1e-9 * max(1.0, self._sxx):  # all raw estimates alike: a ratio will do
            return raw * self._sy / self._sx
        slope = (self._sxy - n * mean_x * mean_y) / spread
        return max(1.0, mean_y + slope * (raw - mean_x))

    def observe(self, raw: int, actual: int) -> None:
        if actual > 0:
            self.samples += 1
            self._sx += raw
            self._sy += actual
            self._sxx += raw * raw
            self._sxy += raw * actual


class Gate:
    """At most ``limit`` holders at once; the limit can change while requests wait.

    Waiters queue in order and a release wakes exactly one of them (no thundering herd)."""

    def __init__(self, initial: int, maximum: int) -> None:
        self.maximum = max(1, maximum)
        self.limit = max(1, min(initial, self.maximum))
        self.held = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> None:
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the waker counted us in
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise

    def release(self) -> None:
        self.held -= 1
        self._wake()

    def resize(self, limit: int) -> None:
        self.limit = max(1, min(limit, self.maximum))
        self._wake()

    def _wake(self) -> None:
        while self.held < self.limit and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.held += 1
                waiter.set_result(None)


class CapacityProbe:
    """The in-flight bound for a server that sends no rate limits: a hill climb on throughput.

    A round lasts until ``max(ROUND_MIN, ROUND_PER_SLOT x bound)`` answers came back (the
    first starts at the first answer), and gives their rate (answers per second). While a round
    beats the best rate so far by ``GAIN``, and by at least ``SHARE`` of the step's own rise (a
    step from 32 to 64 must bring 25% more: far less means the extra requests mostly wait,
    latency up for little), the bound rises: doubling until the first round that does not (slow
    start), by a quarter (at least one) after. A round that does not has passed the knee (more
    in flight only waits in the server's queue): the bound goes back to the best round's and
    holds. When the very first step up buys nothing, the first bound may itself be past the
    knee (a server that works on one answer at a time, and loses throughput to the ones it
    queues, as llama.cpp's Python server does): the bound then halves while each round beats
    the best by ``GAIN``, down to 1, and goes back to the best bound at the first that does
    not. Held ``HOLD_ROUNDS`` rounds, it tries one step up again, in case the server has room
    now; a held round far slower than the best (the server slowed) becomes the new measure.
    Overload (a 503, a timeout, a 429 without limits) halves the bound (`overloaded`) and the
    climb starts again from there.
    """

    ROUND_MIN = 16
    ROUND_PER_SLOT = 3
    GAIN = 0.05
    SHARE = 0.25
    HOLD_ROUNDS = 8
    SLOWER = 0.7

    def __init__(self) -> None:
        self.best_rate = 0.0
        self.best_bound = 0
        self.held = 0
        self.doubling = True  # slow start: until a step up buys nothing
        self.climbed = False  # a step up has beaten the best: the knee is above the first bound
        self.descending = False  # halving: the first bound was past the knee
        self.started: float | None = None  # the first round starts at the first answer
        self.answers = 0

    def _restart(self, now: float | None) -> None:
        self.started = now
        self.answers = 0

    def answered(self, bound: int, now: float) -> int | None:
        """Count one answer at in-flight bound ``bound``; the new bound when a round ends with
        a change, else None."""
        if self.started is None:  # not from before the first answer: first contact, start-up
            self._restart(now)
            return None
        self.answers += 1
        if self.answers < max(self.ROUND_MIN, self.ROUND_PER_SLOT * bound):
            return None
        rate = self.answers / max(now - self.started, 1e-6)
        self._restart(now)
        return self._round_ended(bound, rate)

    def _round_ended(self, bound: int, rate: float) -> int | None:
        """The new bound after a round at ``bound`` gave ``rate`` answers a second, or None."""
        rise = bound / self.best_bound - 1 if self.best_bound else 0.0
        if rate > self.best_rate * (1 + max(self.GAIN, self.SHARE * rise)):  # still climbing
            return self._faster(bound, rate)
        if bound > self.best_bound and self.doubling and not self.climbed and self.best_bound > 1:
            # the first step up bought nothing: the first bound may be past the knee, try fewer
            self.doubling, self.descending = False, True
            return self.best_bound // 2
        if bound != self.best_bound:  # the step bought nothing: back to the knee
            self.held, self.doubling, self.descending = 0, False, False
            return self.best_bound
        if rate < self.best_rate * self.SLOWER:
            self.best_rate = rate
        self.held += 1
        if self.held >= self.HOLD_ROUNDS:
            self.held = 0
            return _step_up(bound)
        return None

    def _faster(self, bound: int, rate: float) -> int | None:
        """A round beat the best: the next bound in the direction it went (None: at 1)."""
        self.climbed = self.climbed or (self.best_bound > 0 and bound > self.best_bound)
        self.best_rate, self.best_bound, self.held = rate, bound, 0
        if self.descending:
            self.descending = bound > 1
            return bound // 2 if bound > 1 else None
        return 2 * bound if self.doubling else _step_up(bound)

    def overloaded(self, bound: int) -> int:
        """The bound after the server said it is overloaded: half, and the climb starts over
        (a quarter at a time)."""
        self.best_rate, self.best_bound, self.held, self.doubling = 0.0, 0, 0, False
        self.descending = False
        self._restart(None)
        return max(1, bound // 2)


def _step_up(bound: int) -> int:
    return bound + max(1, bound // 4)


def needed_concurrency(rate_per_s: float, latency_s: float, floor: int) -> int:
    """In-flight requests needed to sustain ``rate_per_s`` at ``latency_s``, with headroom."""
    return max(floor, math.ceil(rate_per_s * latency_s * 1.5) + 2)
