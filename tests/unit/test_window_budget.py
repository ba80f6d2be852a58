"""Short fixed windows budgeted per window: the learned window and the last filled fast, every
window held to its share, a stall caught up within its window, and the window's length learned
from the remaining count before a second edge is seen."""

import collections
import heapq
import math
import random

import pytest

from emulator.core.ratelimit import RateLimiter
from maple_engine.providers.realtime import RateLimits as Limits
from maple_engine.send.bucket_level import BucketLevel
from maple_engine.send.pacing import Pacer, WindowClock
from maple_engine.send.window_budget import END_SHARE, FAST, STEADY, WindowBudget
from tests.unit.test_ratelimits import learn_windows


def test_window_length_from_the_step_of_the_remaining_count() -> None:
    clock = WindowClock()  # 2,700 RPM over 2 s windows: 90 a window, reported as 90 x 30
    clock.observe(sent_at=10.0, reset=0.5, remaining=2670)
    assert clock.length is None  # one count shows no step
    clock.observe(sent_at=10.1, reset=0.4, remaining=2580)  # two admissions in between
    assert clock.length is None  # the edge has not yet stood still for long: no window yet
    clock.observe(sent_at=10.2, reset=0.3, remaining=2580)  # 0.2 s on, the same edge: fixed
    assert clock.length == pytest.approx(2 / 3)  # windows that divide the real ones
    clock.observe(sent_at=10.2, reset=0.3, remaining=2640)  # consecutive: one request's step
    assert clock.length == pytest.approx(2.0) and clock.edge == pytest.approx(10.5)
    longer = WindowClock()  # a step that says 0.67 s while a reset says 1.5 s: not believed
    for sent_at, left in ((9.8, 2670), (10.0, 2580)):
        longer.observe(sent_at=sent_at, reset=11.5 - sent_at, remaining=left)
    assert longer.fixed and longer.length is None
    minute = WindowClock()  # a per-minute count steps by one: no short window in it
    for sent_at, left in ((9.8, 2699), (10.0, 2698)):
        minute.observe(sent_at=sent_at, reset=11.5 - sent_at, remaining=left)
    assert minute.fixed and minute.length is None


def test_a_budget_moves_a_send_that_would_overfill_or_end_its_window() -> None:
    budget = WindowBudget()
    window, gap = (10.0, 2.0), 2.0 / 90
    moments = [budget.place(10.5, window, 3, gap, ending=False)[0] for _ in range(4)]
    assert moments[:3] == [10.5] * 3 and moments[3] == pytest.approx(12.05)  # the next window
    late, _ = budget.place(14.0 - 0.5 * END_SHARE * 2.0, window, 90, gap, ending=False)
    assert late == pytest.approx(14.05)  # the last END_SHARE of a window takes no send


def test_a_send_woken_too_late_for_its_window_is_not_in_time() -> None:
    budget, window = WindowBudget(), (10.0, 2.0)
    assert budget.in_time(10.5, now=11.9, window=window)
    assert not budget.in_time(10.5, now=11.97, window=window)  # it would count in the next


def test_the_pace_quickens_when_the_rest_of_a_window_would_not_fit() -> None:
    window, gap = (0.0, 2.0), 2.0 / 90
    assert WindowBudget().place(0.05, window, 90, gap, ending=False)[1] == STEADY
    assert WindowBudget().place(0.9, window, 90, gap, ending=False)[1] == 0.5  # a stall
    assert WindowBudget().place(1.5, window, 90, gap, ending=False)[1] == FAST  # learned late
    assert WindowBudget().place(0.05, window, 90, gap, ending=True)[1] == FAST  # the last ones


def drive(
    pacer: Pacer,
    rows: int,
    phase: float,
    seed: int,
    *,
    stall: float | None = None,
    limiter: str = "window",
) -> dict:
    """One sender booking ``rows`` sends through ``Pacer.book`` against the emulator's limiter
    at 2,700 RPM holding 2 s of it (fixed windows of 90 whose edges are ``phase`` s off the
    clock's, or a token bucket of 90), learning from the answers 200-500 ms later; 4 sends in
    flight until the limit is known, as the engine starts. A stall holds the booker still for
    0.6 s at that moment. Each send reaches the server 2 ms after it goes."""
    rng, server = random.Random(seed), RateLimiter(2700, None, 2.0, limiter)
    answers: list[tuple[float, float, Limits]] = []
    now, sent, refused, admitted = 1.0, 0, 0, []
    pacer.left = rows
    while sent < rows:
        while answers and (answers[0][0] <= now or (not pacer.known and len(answers) >= 4)):
            at, sent_at, limits = heapq.heappop(answers)
            now = max(now, at)
            pacer.learn(limits, at, sent_at)
        if stall is not None and now >= stall:
            now, stall = now + 0.6, None
        grid = pacer.known and pacer.calm(now)
        go = pacer.book(1.0, now, grid)
        decision = server.check(1, now=go + 0.002 + phase)
        if decision.allowed:
            admitted.append(go + 0.002)
        else:
            refused += 1
        limit, left, reset = decision.requests
        limits = Limits(rpm=limit, remaining_requests=left, reset_requests=reset)
        heapq.heappush(answers, (go + rng.uniform(0.2, 0.5), go, limits))
        sent += 1
        now = max(now, go - (pacer.step(1.0) if grid else 0.0))
    used = collections.Counter(math.floor((at + phase) / 2.0) for at in admitted)
    return {"used": used, "refused": refused, "done": max(admitted), "first": 1.0}


@pytest.mark.parametrize(("phase", "gain"), [(0.3, -0.2), (0.9, 0.0), (1.6, 0.5)])
def test_every_window_holds_its_share_from_the_learned_one_to_the_last(
    phase: float, gain: float
) -> None:
    """Every window full, none overfilled; the job's last send ``gain`` seconds or more ahead
    of an even pace from the first send (66.7 s), by how much of the first window is left
    once the limit is learned (its phase here)."""
    run = drive(Pacer(), 3000, phase, seed=int(phase * 10))
    assert run["refused"] == 0
    windows = [run["used"][w] for w in sorted(run["used"])]
    assert all(count == 90 for count in windows[1:-1])  # no window short of its share
    assert run["done"] - run["first"] < 3000 / 45 - gain


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_token_bucket_is_paced_evenly_to_its_rate(seed: int) -> None:
    """A bucket's resets move on with every send: no window is learned, nothing is refused,
    and the sends go at the limit; a stall of 0.6 s is taken back from what the bucket kept."""
    pacer = Pacer()
    run = drive(pacer, 3000, 0.0, seed=seed, limiter="bucket", stall=30.0)
    assert run["refused"] == 0 and pacer.windows.bucket and pacer.windows.length is None
    assert pacer.level.capacity == pytest.approx(90, rel=0.05)
    rate = 3000 / (run["done"] - run["first"])
    assert rate >= 0.995 * 45


def test_a_stall_is_caught_up_within_its_window() -> None:
    run = drive(Pacer(), 1500, 0.5, seed=3, stall=8.3)  # 0.6 s of the window from 7.5 s
    assert run["refused"] == 0
    windows = [run["used"][w] for w in sorted(run["used"])]
    assert windows[4] >= 86  # 27 slots lost evenly paced (one taken back); 3 or fewer here
    assert all(count == 90 for i, count in enumerate(windows[1:-1], 1) if i != 4)


def test_senders_sharing_a_limit_and_token_bound_senders_are_not_budgeted() -> None:
    shared = Pacer(rpm=2700)
    learn_windows(shared.windows, 1.0)
    assert shared.window_capacity(1.0, now=100.0) == 45
    shared.senders = 2  # each paces to its rank's share of a window instead
    assert shared.window_capacity(1.0, now=100.0) is None
    tokens = Pacer(rpm=2700, tpm=100_000)  # 40 tokens a request bind at 2,500 RPM
    learn_windows(tokens.windows, 1.0)
    assert tokens.window_capacity(40.0, now=100.0) is None
    assert tokens.window_capacity(10.0, now=100.0) == 45


def test_a_bucket_level_is_learned_from_the_remaining_count_and_the_reset() -> None:
    """A bucket of 90 (2 s of 2,700 RPM), 60 requests over 0.6 s, then 0.4 s without: 90 - 60
    + 45 of refill in the second, 75 in all, 30 above half of it to take back."""
    server, level = RateLimiter(2700, None, 2.0, "bucket"), BucketLevel()
    sent: collections.deque[float] = collections.deque()
    assert level.room(100.0, 0) == 0  # nothing learned yet
    for i in range(60):
        at = 100.0 + i * 0.01
        limit, left, reset = server.check(1, now=at).requests
        sent.append(at)
        limits = Limits(rpm=limit, remaining_requests=left, reset_requests=reset)
        level.learn(limits, at, sent, i + 1)
    assert level.capacity == pytest.approx(90, rel=0.05)
    assert level.room(101.0, 60) == pytest.approx(30, abs=2)
    assert level.room(101.0, 70) == pytest.approx(20, abs=2)  # ten more booked since
