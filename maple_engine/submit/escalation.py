"""Work that could not end as batches before the deadline goes to the deadline's fallback lanes
at once, instead of waiting until the deadline is due.

A job with ``--deadline`` sends its shards as batches while a batch can still end in time.
A batch's expected turnaround is its p90 for its size from the provider and model's
turnaround fit (`maple_engine.plan.turnaround`, the fit the shard sizing chose the size by).
Without a fit (too little history), it is the history's median
(`maple_engine.submit.stalls.turnaround_limit`; none until enough batches completed), or at
least twice the age of the job's oldest batch in flight (it has not ended in that time; with
nothing else known it is expected to run as long again).

- A shard that waits for the queue (its limit probed one validated batch at a time, or its
  room taken) reaches the provider after the batches before it. Its expected end is
  ``now + (place - 1) x wait + max(turnaround, wait)``, where ``wait`` is how long the job's
  newest batch in flight has been out (a batch sent next waits at least as long to pass
  validation) and ``place`` its place among the waiting shards while a limit is probed (else
  1). A shard whose expected end falls past ``deadline - margin`` is marked
  (``<key>/deadline-late-<n>.json``); every attempt of it from then on goes through the late
  lanes (flex, real time, priority: `maple_engine.send.deadline_lanes`), sent at once.
- A batch in flight whose expected end (sent + turnaround) falls past ``deadline - margin`` is
  cancelled then, not at the margin (a cancel takes a while to settle), and its unrun rows go
  through the late lanes, as a stalled batch's do (`maple_engine.submit.stalls`).
"""

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from maple_engine.model import BatchState, Submission, is_realtime
from maple_engine.plan.turnaround import TurnaroundFit, history_fit
from maple_engine.send.deadline_lanes import margin
from maple_engine.storage.layout import JobLayout
from maple_engine.submit.deadline import cancel_once
from maple_engine.submit.stalls import submitted_at, turnaround_limit

if TYPE_CHECKING:
    from maple_engine.job import Job

MEDIAN = 50.0
P90 = 0.9


def in_flight(states: Sequence[tuple[Submission, BatchState]]) -> list[Submission]:
    return [sub for sub, state in states if not state.ended and not is_realtime(sub)]


def _sent(subs: Sequence[Submission]) -> list[float]:
    times = [submitted_at(s) for s in subs if not is_realtime(s)]
    return [t for t in times if t is not None]


def unreachable(
    waiting: Sequence[str],
    *,
    now: float,
    cutoff: float,
    wait_s: float,
    turnaround_s: float | Mapping[str, float],
    probe: bool,
) -> list[str]:
    """Of ``waiting`` (in the order they would go), the shards whose batch could not end by
    ``cutoff``: the ``k``-th waits ``k - 1`` turns of ``wait_s`` while a limit is probed.
    ``turnaround_s``: one for every batch, or each shard's (by its size)."""
    late = []
    for k, shard in enumerate(waiting, 1):
        turns = k - 1 if probe else 0
        runs = turnaround_s if isinstance(turnaround_s, float | int) else turnaround_s[shard]
        if now + turns * wait_s + max(runs, wait_s) > cutoff:
            late.append(shard)
    return late


def is_late(job: "Job", shard: str, attempt: int) -> bool:
    """Whether ``shard``'s attempt goes through the deadline's late lane (marked, or due)."""
    lanes = job.deadline
    return lanes is not None and (lanes.deadline_due() or lanes.sent_late(shard, attempt))


def all_late(job: "Job", shards: Sequence[str]) -> bool:
    """Whether every one of ``shards`` goes through the deadline's late lane now."""
    if job.deadline is None:
        return False
    return all(is_late(job, s, job.state.progress(s).attempt) for s in shards)


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
    lanes = job.deadline
    if lanes is None or not waiting:
        return []
    at = lanes.deadline_at()
    if at is None:
        return []
    state = job.state
    attempts = {shard: state.progress(shard).attempt for shard in waiting}
    marked = [s for s in waiting if lanes.sent_late(s, attempts[s])]
    rest = [s for s in waiting if s not in marked]
    now, sent = time.time(), _sent(running)
    wait_s = max(now - max(sent), 0.0) if sent else 0.0
    fit = _fit(job)
    if fit is None:
        turnaround = expected_turnaround(job, sent, now)
        turnarounds = dict.fromkeys(rest, turnaround)
    else:  # each shard's p90 for its size
        rows = {info.key: info.rows for info in state.manifest() or []}
        size = job.spec.max_requests_per_batch
        turnarounds = {s: fit.seconds(rows.get(s, size), P90) for s in rest}
    late = unreachable(
        rest,
        now=now,
        cutoff=at - margin(lanes.duration_s),
        wait_s=wait_s,
        turnaround_s=turnarounds,
        probe=probe,
    )
    for shard in late:
        record = {
            "at": now,
            "wait_s": wait_s,
            "turnaround_s": turnarounds[shard],
            "deadline_at": at,
        }
        state.storage.write_json(
            JobLayout(job.spec.name).deadline_late(shard, attempts[shard]), record
        )
    return marked + late


def cancel_unreachable(job: "Job", running: Sequence[Submission]) -> list[Submission]:
    """Cancel (once each) the job's batches in flight expected to end past the deadline's
    margin; their shards' next attempts go through the late lanes. Returns those cancelled
    now."""
    lanes = job.deadline
    if lanes is None or not running or lanes.deadline_due():
        return []
    at = lanes.deadline_at()
    if at is None:
        return []
    now, cutoff = time.time(), at - margin(lanes.duration_s)
    fit = _fit(job)
    turnaround = expected_turnaround(job, _sent(running), now)
    cancelled = []
    for sub in running:
        sent = submitted_at(sub)
        if fit is not None:  # its p90 for its size, not a guess from its age
            turnaround = fit.seconds(sub.request_count, P90)
        if sent is None or is_realtime(sub) or sent + turnaround <= cutoff:
            continue
        record = {"batch_id": sub.batch_id, "age_s": now - sent, "expected_s": turnaround}
        if cancel_once(job, sub, "stall", record):
            cancelled.append(sub)
    return cancelled


def expected_turnaround(job: "Job", sent: Sequence[float], now: float) -> float:
    """A batch's expected turnaround: the history's median, or twice the age of the oldest
    batch in flight (``sent``: when they were sent), whichever is longer."""
    oldest = 2 * (now - min(sent)) if sent else 0.0
    median = None if job.costs is None else _median(job)
    return max(oldest, median or 0.0)


def _fit(job: "Job") -> TurnaroundFit | None:
    """The provider and model's turnaround by batch size, where the history has one."""
    if job.costs is None:
        return None
    return history_fit(job.costs, job.wire.provider_name, job.spec.model)


def _median(job: "Job") -> float | None:
    return turnaround_limit(job.costs, job.wire.provider_name, job.spec.model, MEDIAN)
