"""Shards that wait for the provider's batch queue but could not end there before the deadline
go to the deadline's fallback lanes at once, instead of waiting until the deadline is due.

A job with ``--deadline`` sends its shards as batches while a batch can still end in time.
A shard that waits for the queue (its limit being probed one validated batch at a time, or
its room taken) reaches the provider only after the batches before it. Its expected end is

    now + (turns - 1) x wait + turnaround

where ``wait`` is how long the job's newest batch in flight has been out (a batch sent next
waits at least as long for it to pass validation, as its own took), ``turns`` the shard's place
among the waiting shards while a limit is probed (one turn each), else 1, and ``turnaround``
the larger of ``wait`` and the provider's median turnaround for the model in the batch history
(`maple_engine.submit.stalls.turnaround_limit`; none until enough batches completed). A shard
whose expected end falls past ``deadline - margin`` is marked (``<key>/deadline-late-<n>.json``)
and every attempt of it from then on goes through the deadline's late lane (flex, real time,
priority: `maple_engine.submit.deadline`), sent at once and beside the others.
"""

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from maple_engine.model import BatchState, Submission, is_realtime
from maple_engine.providers.base import Provider
from maple_engine.storage.layout import JobLayout
from maple_engine.submit.deadline import DeadlineProvider, margin
from maple_engine.submit.stalls import submitted_at, turnaround_limit

if TYPE_CHECKING:
    from maple_engine.job import Job

MEDIAN = 50.0


def newest_sent(subs: Sequence[Submission]) -> float | None:
    """When the newest of the job's batches in flight (no real-time attempt) was sent."""
    times = [submitted_at(s) for s in subs if not is_realtime(s)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def in_flight(states: Sequence[tuple[Submission, BatchState]]) -> list[Submission]:
    return [sub for sub, state in states if not state.ended and not is_realtime(sub)]


def unreachable(
    waiting: Sequence[str],
    *,
    now: float,
    cutoff: float,
    wait_s: float,
    turnaround_s: float,
    probe: bool,
) -> list[str]:
    """Of ``waiting`` (in the order they would go), the shards whose batch could not end by
    ``cutoff``: the ``k``-th waits ``k - 1`` turns of ``wait_s`` while a limit is probed."""
    late = []
    for k, shard in enumerate(waiting, 1):
        turns = k - 1 if probe else 0
        if now + turns * wait_s + max(turnaround_s, wait_s) > cutoff:
            late.append(shard)
    return late


def is_late(provider: Provider, shard: str, attempt: int) -> bool:
    """Whether ``shard``'s attempt goes through the deadline's late lane (marked, or due)."""
    return isinstance(provider, DeadlineProvider) and (
        provider.deadline_due() or provider.sent_late(shard, attempt)
    )


def all_late(job: "Job", shards: Sequence[str]) -> bool:
    """Whether every one of ``shards`` goes through the deadline's late lane now."""
    return all(is_late(job.provider, s, job.state.progress(s).attempt) for s in shards)


def escalate_waiting(
    job: "Job",
    waiting: Sequence[str],
    running: Sequence[Submission],
    *,
    probe: bool,
) -> list[str]:
    """Mark the ``waiting`` shards (in order) that could not end as batches before the
    deadline; returns every waiting shard marked (now or before). ``running``: the job's
    batches in flight. A job without a deadline marks none."""
    provider = job.provider
    if not isinstance(provider, DeadlineProvider) or not waiting:
        return []
    at = provider.deadline_at()
    if at is None:
        return []
    state = job.state
    attempts = {shard: state.progress(shard).attempt for shard in waiting}
    marked = [s for s in waiting if provider.sent_late(s, attempts[s])]
    rest = [s for s in waiting if s not in marked]
    now = time.time()
    newest = newest_sent(running)
    wait_s = 0.0 if newest is None else max(now - newest, 0.0)
    turnaround = _median_turnaround(job, provider)
    late = unreachable(
        rest,
        now=now,
        cutoff=at - margin(provider.duration_s),
        wait_s=wait_s,
        turnaround_s=turnaround or 0.0,
        probe=probe,
    )
    for shard in late:
        record = {"at": now, "wait_s": wait_s, "turnaround_s": turnaround, "deadline_at": at}
        state.storage.write_json(
            JobLayout(job.spec.name).deadline_late(shard, attempts[shard]), record
        )
    return marked + late


def _median_turnaround(job: "Job", provider: DeadlineProvider) -> float | None:
    if job.costs is None:
        return None
    return turnaround_limit(job.costs, provider.provider_name, job.spec.model, MEDIAN)
