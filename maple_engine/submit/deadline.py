"""Deadlines: rows still in batches when a job's deadline approaches go through real time.

When ``deadline - margin`` arrives (`maple_engine.send.deadline_lanes` has the rules and the
lanes), the sensor cancels the job's batches still running (the provider returns what already
ran; only unrun rows come back ``batch_cancelled``), and every shard attempt sent from then on,
the unrun rows and shards never sent alike, goes through the late lanes (flex, real time,
priority), paced to the provider's rate limits like the real-time providers. Their cost is
recorded at real-time prices; priority attempts are booked at the tier's price, and the run's
summary shows their rows and what they cost over standard real time (`deadline_split`).

Shards waiting for the provider's queue do not wait for the deadline to be due: one that could
not end as a batch in time goes through the late lanes at once (`maple_engine.submit.escalation`).
"""

import time
from typing import TYPE_CHECKING, Any, Literal

from maple_engine.errors import ProviderError
from maple_engine.model import BatchState, Submission, is_realtime, priority_priced

if TYPE_CHECKING:
    from maple_engine.job import Job


def cancel_for_deadline(job: "Job", states: list[tuple[Submission, BatchState]]) -> list[str]:
    """Cancel the job's batches still running (once each); the ids cancelled now."""
    cancelled = []
    for sub, state in states:
        if state.ended or is_realtime(sub) or state.status in ("cancelling", "canceling"):
            continue
        if cancel_once(job, sub, "deadline", {"batch_id": sub.batch_id, "at": time.time()}):
            cancelled.append(sub.batch_id)
    return cancelled


def cancel_once(
    job: "Job", sub: Submission, why: Literal["deadline", "stall"], record: dict[str, Any]
) -> bool:
    """Cancel ``sub``'s batch for ``why`` unless it was, then keep ``record`` as the mark."""
    if job.state.cancel_record(why, sub.shard, sub.attempt) is not None:
        return False
    try:
        job.submission_lane(sub).cancel(sub)
    except ProviderError as exc:
        if exc.status != 400:  # 400: it ended meanwhile; its results are collected as usual
            raise
    job.state.write_cancel_record(why, sub.shard, sub.attempt, record)
    return True


def deadline_split(costs: Any, job: str, shards: set[str], price: Any) -> dict[str, Any]:
    """How the run's billed rows went (batch / real-time) and what the real-time ones cost,
    with the premium over the same usage at batch prices (what the deadline cost); of the
    real-time rows, those on the priority tier, what they cost and how much more than at
    standard real-time prices."""
    from maple_engine.ledger.pricing import TokenUsage, cost_usd

    entries = [
        e for e in (costs.job_entries(job) if costs is not None else []) if e.shard in shards
    ]
    late = [e for e in entries if e.mode == "realtime"]
    paid = sum(e.cost_usd for e in late)
    usage = TokenUsage(
        input_tokens=sum(e.input_tokens for e in late),
        cached_input_tokens=sum(e.cached_input_tokens for e in late),
        output_tokens=sum(e.output_tokens for e in late),
    )
    at_batch = cost_usd(price, usage, True) if late and price is not None else paid
    priority = [e for e in late if e.batch_id is not None and priority_priced(e.batch_id)]
    priority_paid = sum(e.cost_usd for e in priority)
    return {
        "batch_rows": sum(e.requests for e in entries if e.mode == "batch"),
        "realtime_rows": sum(e.requests for e in late),
        "realtime_cost_usd": round(paid, 6),
        "deadline_cost_usd": round(paid - at_batch, 6),
        "priority_rows": sum(e.requests for e in priority),
        "priority_cost_usd": round(priority_paid, 6),
        "priority_premium_usd": round(
            priority_paid - sum(e.realtime_cost_usd for e in priority), 6
        ),
    }
