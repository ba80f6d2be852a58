"""Stalled batches: in flight longer than the usual turnaround of their provider and model.

The batch history (`maple_engine.ledger.batch_history`) gives each provider and model a
turnaround distribution; a batch older than its ``stall_percentile`` (default p95) is stalled,
once at least `MIN_COMPLETED` batches of that provider and model completed in the last
`HISTORY_DAYS` days. ``maple status`` reports stalled batches (age vs the percentile); a job
with a deadline escalates them at once instead of waiting for the deadline: the batch is
cancelled (what it ran is collected as usual) and every later attempt of its shard goes through
the provider's flex twin while the time left allows, else its real-time twin
(`maple_engine.send.deadline_lanes`).
"""

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.model import BatchState, Submission, is_realtime
from maple_engine.plan.turnaround import HISTORY_DAYS, TurnaroundFit, history_fit
from maple_engine.report.batch_stats import duration_text, turnaround_quantile
from maple_engine.submit.deadline import cancel_once

if TYPE_CHECKING:
    from maple_engine.job import Job

MIN_COMPLETED = 5


@dataclasses.dataclass(frozen=True)
class Stall:
    """A batch in flight for ``age_s``, past ``limit_s`` (the turnaround percentile)."""

    submission: Submission
    age_s: float
    limit_s: float
    percentile: float

    def describe(self) -> str:
        return (
            f"batch {self.submission.batch_id} of shard {self.submission.shard} in flight "
            f"{duration_text(self.age_s)}, p{self.percentile:g} turnaround "
            f"{duration_text(self.limit_s)}"
        )


def turnaround_limit(costs: Any, provider: str, model: str, percentile: float) -> float | None:
    """The ``percentile`` of the completed batches' turnaround of ``provider`` and ``model``
    (seconds), or None with fewer than `MIN_COMPLETED` of them in the history."""
    since = (datetime.now(UTC) - timedelta(days=HISTORY_DAYS)).date()
    history = costs.batch_history(HistoryFilter(since=since, provider=provider))
    done = history.filter((history["model"] == model) & (history["status"] == "completed"))
    if done.height < MIN_COMPLETED:
        return None
    return turnaround_quantile(done, percentile / 100).get((provider, model))


def submitted_at(sub: Submission) -> float | None:
    try:
        at = datetime.fromisoformat(sub.submitted_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def stalled(
    subs: list[Submission],
    limit_s: float | None,
    percentile: float,
    now: float | None = None,
    fit: TurnaroundFit | None = None,
) -> list[Stall]:
    """The batches among ``subs`` (all in flight) older than ``limit_s``; with a turnaround
    ``fit`` by size, a batch larger than the history's typical one gets the longer limit its
    size needs (a full batch is not stalled for taking longer than small ones)."""
    if limit_s is None:
        return []
    now = time.time() if now is None else now
    found = []
    for sub in subs:
        start = submitted_at(sub)
        limit = limit_s + (fit.longer_than_typical(sub.request_count) if fit else 0.0)
        if start is not None and not is_realtime(sub) and now - start > limit:
            found.append(Stall(sub, now - start, limit, percentile))
    return found


def escalate_stalled(job: "Job", states: list[tuple[Submission, BatchState]]) -> list[Stall]:
    """With a deadline: cancel the job's stalled batches (once each) and mark their shards so
    that every later attempt goes flex or real-time. Returns the batches cancelled now."""
    if job.spec.deadline_s is None or job.costs is None:
        return []
    running = [s for s, state in states if not state.ended and not is_realtime(s)]
    if not running:
        return []
    percentile = job.spec.stall_percentile
    provider = running[0].provider
    limit = turnaround_limit(job.costs, provider, job.spec.model, percentile)
    fit = history_fit(job.costs, provider, job.spec.model) if limit is not None else None
    escalated = []
    for stall in stalled(running, limit, percentile, fit=fit):
        sub = stall.submission
        record = {"batch_id": sub.batch_id, "age_s": stall.age_s, "limit_s": stall.limit_s}
        if cancel_once(job, sub, "stall", record):
            escalated.append(stall)
    return escalated
