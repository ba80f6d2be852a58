"""The shard size of a job with ``--deadline`` or ``--target-hours``: what
`maple_engine.plan.turnaround.choose_size` picks for the rows it sends, the batch history of
its provider and model, the time left and the provider queue's limit.

A deadline counts from the start of the job's version; its batches must end before the
deadline's margin, when the rest goes real-time (`maple_engine.send.deadline_lanes`). A target
(``--target-hours``) only sizes the shards. A version's sizing is written in its manifest, so a
resumed job keeps the shard layout it recorded.
"""

import time
from collections.abc import Callable

from maple_engine.job import Job
from maple_engine.plan.sharding import shard_limits
from maple_engine.plan.turnaround import Sizing, TurnaroundFit, choose_size, history_fit
from maple_engine.send.deadline_lanes import margin
from maple_engine.spec import JobSpec
from maple_engine.submit.queue import limit_of, queue_of


def target_s(spec: JobSpec, started_at: float, now: float | None = None) -> float | None:
    """Seconds left for the batches: to the deadline's margin, or to the target; None with
    neither."""
    targets = []
    if spec.deadline_s is not None:
        targets.append(spec.deadline_s - margin(spec.deadline_s))
    if spec.target_hours is not None:
        targets.append(spec.target_hours * 3600)
    if not targets:
        return None
    elapsed = (time.time() if now is None else now) - started_at
    return max(0.0, min(targets) - elapsed)


def size_shards(job: Job, rows: Callable[[], int], started_at: float) -> Sizing | None:
    """The shard size of a version of ``job`` started at ``started_at`` whose sent rows
    ``rows`` counts (called only when it is sized: a batch job with a deadline or target), or
    None to keep the limits: what `maple_engine.plan.rerun.shard_input` takes as its sizer."""
    return plan_size(job, rows(), started_at) if sized(job) else None


def sized(job: Job) -> bool:
    """Whether the job's shard size is chosen here (a batch job with a deadline or target)."""
    return (
        job.mode == "batch" and job.costs is not None and target_s(job.spec, 0.0, 0.0) is not None
    )


def plan_size(job: Job, rows: int, started_at: float) -> Sizing:
    """The shard size for ``rows`` requests of ``job`` (see `sized`; a job without a deadline
    or target gets full batches and their expected finish)."""
    fit = history_fit(job.costs, job.wire.provider_name, job.spec.model)
    max_requests, _ = shard_limits(job.spec, job.wire)
    return choose_size(
        rows,
        fit,
        target_s(job.spec, started_at),
        max_requests,
        min_requests=job.wire.limits().min_requests,
        in_flight=in_flight_requests(job, fit),
    )


def in_flight_requests(job: Job, fit: TurnaroundFit | None) -> int | None:
    """How many requests the provider queue takes at once (None: no limit known): its limit in
    requests, or in tokens over the history's prompt tokens per request."""
    queue = queue_of(job)
    limit = limit_of(job, queue) if queue is not None else None
    if queue is None or limit is None:
        return None
    if queue.unit == "requests":
        return limit
    per = fit.tokens_per_request if fit is not None else None
    return int(limit / per) if per else None
