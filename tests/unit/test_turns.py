"""Start slots booked a group at a time: the requests of one grid point go on one wake."""

import asyncio
import time

from maple_engine.send.pacing import GROUP_MAX, Pacer
from maple_engine.send.turns import Turns


def released(pacer: Pacer, requests: int, halted: bool = False) -> list[float]:
    """When each of ``requests`` waiting requests got its turn, in the order they got it."""
    turns = Turns(pacer, lambda raw: 1.0, lambda: halted)
    moments: list[float] = []

    async def one() -> None:
        await turns.take(1, "a request")
        moments.append(time.monotonic())

    async def all_of_them() -> None:
        await asyncio.gather(*(one() for _ in range(requests)))

    asyncio.run(all_of_them())
    return moments


def test_the_requests_of_a_grid_point_go_together_at_the_paced_rate() -> None:
    pacer = Pacer(rpm=6000)  # 100 a second: grid points 50 ms apart, 5 requests each
    moments = released(pacer, 60)
    wakes = {round(moment, 3) for moment in moments}  # a stalled loop may merge two, not split
    assert len(wakes) <= 60 / GROUP_MAX + 2  # one wake per grid point, not per request
    assert moments[-1] - moments[0] >= 0.5  # 12 grid points 50 ms apart: the pace, no burst


def test_a_stopped_job_books_no_slot() -> None:
    pacer = Pacer(rpm=60)  # a request a second: a booked slot would wait
    started = time.monotonic()
    assert len(released(pacer, 5, halted=True)) == 5
    assert time.monotonic() - started < 0.5 and pacer.next_at == 0.0


def test_a_released_group_is_told_going_in_one_call_before_any_of_it_goes() -> None:
    pacer = Pacer(rpm=6000)
    told: list[list[int]] = []
    gone: list[tuple[int, int]] = []  # (request, calls told before it went)
    turns: Turns[int] = Turns(pacer, lambda raw: 1.0, lambda: False, told.append)

    async def one(request: int) -> None:
        assert await turns.take(1, request)
        gone.append((request, len(told)))

    async def all_of_them() -> None:
        await asyncio.gather(*(one(request) for request in range(20)))

    asyncio.run(all_of_them())
    assert sorted(request for group in told for request in group) == list(range(20))
    assert len(told) < 20  # groups, not one call per request
    for request, calls in gone:
        assert any(request in group for group in told[:calls])


def test_a_group_released_into_a_pause_is_held_back_and_goes_after_it() -> None:
    pacer = Pacer(rpm=6000)
    told: list[list[int]] = []
    held: list[int] = []
    gone: dict[int, float] = {}

    def going(requests: list[int]) -> None:
        told.append(requests)
        if len(told) == 1:  # an answer spends the window as the first group is released
            pacer.pause(0.2, time.monotonic())

    turns: Turns[int] = Turns(pacer, lambda raw: 1.0, lambda: False, going, held.append)

    async def one(request: int) -> None:
        assert await turns.take(1, request)
        gone[request] = time.monotonic()

    async def all_of_them() -> float:
        started = time.monotonic()
        await asyncio.gather(*(one(request) for request in range(3)))
        return started

    started = asyncio.run(all_of_them())
    assert held and sorted(held) == sorted(told[0])  # said going, then held back
    assert sorted(gone) == [0, 1, 2]
    assert all(gone[request] - started >= 0.2 for request in held)  # not into the pause
