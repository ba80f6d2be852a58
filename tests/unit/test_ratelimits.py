"""The real-time pacing pieces: window edges learned from reset headers, the in-flight gate."""

import asyncio
import math

import pytest

from maple_engine.providers.realtime import RateLimits as Limits
from maple_engine.send.pacing import (
    EDGE_GUARD_S,
    GROUP_MAX,
    Gate,
    Pacer,
    TokenEstimator,
    WindowClock,
)


def learn_windows(clock: WindowClock, length: float) -> None:
    """The resets of fixed windows of ``length`` with edges at ``length``, 2 x ``length``, ...:
    two sends half a window apart in the first (its edge stays put), one in the second."""
    for sent_at in (0.0, length / 2, length):
        clock.observe(sent_at, length - sent_at % length)


def test_window_clock_learns_edges_and_length_from_resets() -> None:
    clock = WindowClock()
    clock.observe(sent_at=10.30, reset=0.699)  # counted 1 ms after it was sent
    clock.observe(sent_at=10.50, reset=0.500)
    assert clock.edge == pytest.approx(11.0) and clock.length is None
    clock.observe(sent_at=11.20, reset=0.800)  # the next window
    assert clock.edge == pytest.approx(12.0) and clock.length == pytest.approx(1.0)
    clock.observe(sent_at=11.40, reset=30.0)  # a minute bucket's reset teaches nothing
    assert clock.edge == pytest.approx(12.0)
    assert clock.clear_of_edges(12.5) == 12.5
    assert clock.clear_of_edges(12.999) == pytest.approx(13.0 + EDGE_GUARD_S)
    assert clock.clear_of_edges(14.001) == pytest.approx(14.0 + EDGE_GUARD_S)


def test_pacer_keeps_sends_clear_of_window_edges() -> None:
    pacer = Pacer(rpm=6000)  # a send every ~10 ms
    learn_windows(pacer.windows, 1.0)  # edges at 1.0, 2.0, ...
    assert pacer.reserve(1, now=1.998) == pytest.approx(0.002 + EDGE_GUARD_S)
    after = pacer.reserve(1, now=1.998)  # the schedule resumes after the moved send
    assert after == pytest.approx(0.002 + EDGE_GUARD_S + pacer.interval(1))


@pytest.mark.parametrize(
    ("rpm", "length", "step"),
    [(3000, 1.0, 0.1), (6000, 1.0, 0.05), (600, 1.0, 0.2), (3000, 0.7, 0.7 / 7), (1200, 2.0, 0.2)],
)
def test_sends_on_the_grid_never_add_a_request_to_a_window(
    rpm: int, length: float, step: float
) -> None:
    """Rounding each booked slot up to the send grid (several requests per event-loop wake)
    keeps every window at the count its slots allow, with no send near an edge and at most
    GROUP_MAX requests per grid point; the step divides the window."""
    pacer = Pacer(rpm=rpm)
    learn_windows(pacer.windows, length)  # edges at length, 2 x length, ...
    assert pacer.step(1) == pytest.approx(step)
    now, sends = 0.5, []
    for _ in range(2000):
        slot = now + pacer.reserve(1, now)
        sends.append(pacer.on_grid(slot, 1))
        assert slot - 1e-9 <= sends[-1] < slot + step + 1e-9
        now = slot
    per_window: dict[int, int] = {}
    per_point: dict[float, int] = {}
    for moment in sends:
        window = math.floor(moment / length)
        per_window[window] = per_window.get(window, 0) + 1
        per_point[round(moment, 6)] = per_point.get(round(moment, 6), 0) + 1
        edge = round(moment / length) * length
        assert abs(moment - edge) >= step / 2 - 1e-9  # half a step from any edge
    assert max(per_window.values()) <= rpm * length / 60
    assert max(per_point.values()) <= GROUP_MAX
    assert len(per_point) <= len(sends) / (0.9 * step * rpm / 60)  # ~step x rate per wake


def test_the_grid_before_any_window_is_learned() -> None:
    assert Pacer().on_grid(0.31, 1) == pytest.approx(0.4)  # no limit known: a plain 0.2 s grid
    assert Pacer(rpm=6000).step(1) == pytest.approx(0.05, rel=0.01)  # GROUP_MAX at 100 per second
    tpm_bound = Pacer(rpm=100_000, tpm=120_000)  # 40 tokens a request: 50 per second
    assert tpm_bound.step(40) == pytest.approx(0.1, rel=0.01)
    assert tpm_bound.step(80) == pytest.approx(0.1, rel=0.01)  # kept while the limits stay the same


def test_gate_wakes_one_waiter_per_release_and_grows_on_resize() -> None:
    async def scenario() -> list[int]:
        gate = Gate(initial=1, maximum=3)
        await gate.acquire()
        waiters = [asyncio.create_task(gate.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        seen = [sum(w.done() for w in waiters)]
        gate.release()
        await asyncio.sleep(0)
        seen.append(sum(w.done() for w in waiters))
        gate.resize(3)
        await asyncio.sleep(0)
        seen += [sum(w.done() for w in waiters), gate.held]
        return seen

    assert asyncio.run(scenario()) == [0, 1, 3, 3]


def test_token_estimator_fits_fixed_framing_as_well_as_length() -> None:
    estimator = TokenEstimator(output_guess=100)
    assert estimator.estimate(40) == 140  # before any usage: raw + the output guess
    for raw in range(10, 60, 5):
        estimator.observe(raw, actual=raw // 2 + 30)  # billed: half the raw, plus 30 fixed
    assert abs(estimator.estimate(20) - 40) < 1 and abs(estimator.estimate(100) - 80) < 1


def test_window_clock_is_not_fooled_by_a_late_counted_request() -> None:
    clock = WindowClock()
    clock.observe(sent_at=10.00, reset=0.940)  # counted 60 ms late: the edge looks early
    clock.observe(sent_at=10.20, reset=0.800)  # on time: the same window's edge, at 11.0
    assert clock.edge == pytest.approx(11.0) and clock.length is None
    clock.observe(sent_at=11.10, reset=0.900)
    assert clock.length == pytest.approx(1.0)


def sends_per_window(pacers: list[Pacer], seconds: float, length: float) -> dict[int, int]:
    """Every pacer booking its sends one by one from its own start for ``seconds``; the sends
    of all of them in each window."""
    per_window: dict[int, int] = {}
    for i, pacer in enumerate(pacers):
        now = 0.5 + 0.137 * i  # each sender starts at its own moment
        while now < seconds:
            now += pacer.reserve(1, now)
            window = math.floor(now / length)
            per_window[window] = per_window.get(window, 0) + 1
    return per_window


@pytest.mark.parametrize(("rpm", "senders"), [(2400, 3), (2400, 2), (1200, 7), (600, 3)])
def test_senders_sharing_a_window_split_its_requests_and_never_overfill_it(
    rpm: int, senders: int
) -> None:
    """N senders that know the window (1 s here) each send a whole number of its requests,
    the numbers adding up to the window's; without the window, 1/N each overfills some."""

    def pacers(learned: bool) -> list[Pacer]:
        made = []
        for rank in range(senders):
            pacer = Pacer(rpm=rpm)
            pacer.senders, pacer.rank = senders, rank
            if learned:
                learn_windows(pacer.windows, 1.0)
            made.append(pacer)
        return made

    limit = rpm // 60
    shares = [p.request_share() for p in pacers(learned=True)]
    assert sum(shares) == pytest.approx(1.0)
    assert {round(s * limit) for s in shares} <= {limit // senders, limit // senders + 1}
    split = sends_per_window(pacers(learned=True), 60.0, 1.0)
    middle = [split[w] for w in range(3, 58)]
    assert max(middle) <= limit
    assert sum(middle) / len(middle) >= 0.99 * limit
    if limit % senders:  # 1/N of a window is no whole number of requests
        assert max(sends_per_window(pacers(learned=False), 60.0, 1.0).values()) > limit


def test_a_spent_window_pauses_until_its_reset_counted_from_the_send() -> None:
    """The reset a slow answer reports was counted when the request was admitted: a pause from
    the answer's arrival would idle the next window for the request's whole latency."""
    pacer = Pacer()
    spent = Limits(rpm=2700, remaining_requests=0, reset_requests=0.3)
    pacer.learn(spent, now=10.45, sent_at=10.0)  # answered 450 ms after it was sent
    assert pacer.paused_until == pytest.approx(10.3)
    pacer.learn(spent, now=20.0)  # no send time known: from the answer
    assert pacer.paused_until == pytest.approx(20.3)
