"""The in-flight bound for a server that sends no rate limits (`CapacityProbe`), against a
simulated server with a throughput knee: answers come back at ``min(bound, slots) / latency``
per second, so more in flight than ``slots`` only waits; and against one that answers one
request at a time and loses throughput to every request it queues (llama.cpp's Python server,
measured: 1.76 answers/s at 1 in flight, 1.05 at 4, 0.80 at 8)."""

import pytest

from maple_engine.send.pacing import CapacityProbe, Gate


def serve(
    probe: CapacityProbe, gate: Gate, slots: int, answers: int, now: float = 0.0
) -> list[int]:
    """Feed ``answers`` answers at the rate the server gives the gate's bound (from ``now``,
    0.25 s an answer); the bounds set."""
    latency, seen = 0.25, []
    for _ in range(answers):
        now += latency / min(gate.limit, slots)
        found = probe.answered(gate.limit, now)
        if found is not None:
            gate.resize(found)
            seen.append(gate.limit)
    return seen


@pytest.mark.parametrize("slots", [6, 32, 50])
def test_the_bound_climbs_to_the_knee_and_holds_there(slots: int) -> None:
    gate = Gate(8, 64)
    seen = serve(CapacityProbe(), gate, slots, 20_000)
    settled = seen[len(seen) // 2 :]  # after the climb: the knee, and a probe a step above
    assert min(settled) >= slots and min(settled) <= 2 * slots, seen
    at_knee = [b for b in settled if b < slots * 1.5]
    assert len(at_knee) >= len(settled) // 2, seen  # most rounds at the knee, not above it


def test_a_bound_below_the_knee_is_never_given_back() -> None:
    gate = Gate(8, 64)
    seen = serve(CapacityProbe(), gate, 1_000, 5_000)  # the server outgrows the ceiling
    assert seen[-1] == 64 and min(seen) == 16, seen  # doubles to the ceiling and stays


def test_overload_halves_the_bound_and_the_climb_starts_again() -> None:
    gate = Gate(8, 64)
    probe = CapacityProbe()
    serve(probe, gate, 32, 5_000)
    before = gate.limit
    gate.resize(probe.overloaded(gate.limit))
    assert gate.limit == before // 2
    assert probe.best_rate == 0.0 and not probe.doubling
    seen = serve(probe, gate, 32, 5_000, now=1_000.0)
    # a quarter at a time (16, 20, 25, 31, 38), back to within a step of the knee
    assert max(seen) <= 40 and seen[-1] >= 0.9 * 32, seen


def test_a_server_that_slows_with_its_queue_gets_one_request_at_a_time() -> None:
    gate = Gate(8, 64)
    probe, now, seen = CapacityProbe(), 0.0, []
    for _ in range(3_000):  # 0.5 s an answer alone, 8% more for each request queued
        now += 0.5 * (1 + 0.08 * (gate.limit - 1))
        found = probe.answered(gate.limit, now)
        if found is not None:
            gate.resize(found)
            seen.append(gate.limit)
    assert seen[:4] == [16, 4, 2, 1], seen  # up once for nothing, then halving while faster
    settled = seen[len(seen) // 2 :]
    assert max(settled) <= 2 and settled.count(1) >= len(settled) // 2, seen  # 1, probing 2
