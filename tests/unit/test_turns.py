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
        await turns.take(1)
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
