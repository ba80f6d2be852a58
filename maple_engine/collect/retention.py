"""Batches whose results may expire before they are collected.

A provider keeps a finished batch's results downloadable for a while (its capabilities'
``results_retention_s``: Mistral 24 hours, OpenAI 30 days); results not collected by then are
lost though they were paid for. ``maple status`` reads only the job's state files, so it does
not know when a batch in flight ended: a batch submitted at ``t`` that ended at once keeps its
results until ``t + retention`` at the earliest. A batch in flight whose earliest expiry is
within `WARN_WITHIN_S` is reported, so that a job whose daemon or command is down runs again
to collect it.
"""

import dataclasses
import time

from maple_engine.model import Submission
from maple_engine.providers.registry import known_capabilities
from maple_engine.report.batch_stats import duration_text
from maple_engine.state import JobState
from maple_engine.submit.stalls import submitted_at

WARN_WITHIN_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Expiring:
    """A batch in flight whose results may be gone in ``left_s`` (negative: may be gone)."""

    submission: Submission
    left_s: float
    retention_s: int

    def describe(self) -> str:
        sub = self.submission
        when = (
            f"may expire within {duration_text(self.left_s)}"
            if self.left_s > 0
            else "may have expired"
        )
        return (
            f"results of batch {sub.batch_id} of shard {sub.shard} {when} if it ended early "
            f"({sub.provider} keeps them {duration_text(self.retention_s)}): run the job's "
            "command again to collect them"
        )


def in_flight(state: JobState) -> list[Submission]:
    """The job's batches in flight: the latest attempt of each shard that waits on one."""
    flying = [
        p.submission
        for s in state.manifest() or []
        if (p := state.progress(s.key)).action == "wait"
    ]
    return [sub for sub in flying if sub is not None]


def job_expiring(state: JobState, provider: str) -> list[Expiring]:
    """The job's batches in flight whose results may expire within the hour (``provider``'s
    results retention from their submission on): ``maple status`` and the sensor's tick say
    so."""
    caps = known_capabilities(provider)
    return expiring(in_flight(state), caps.results_retention_s if caps is not None else None)


def expiring(
    subs: list[Submission],
    retention_s: int | None,
    now: float | None = None,
    within_s: float = WARN_WITHIN_S,
) -> list[Expiring]:
    """The batches among ``subs`` (all in flight) whose results may expire within
    ``within_s`` (none for a provider without a documented retention)."""
    if retention_s is None:
        return []
    now = time.time() if now is None else now
    found = []
    for sub in subs:
        at = submitted_at(sub)
        if at is not None and (left := at + retention_s - now) < within_s:
            found.append(Expiring(sub, left, retention_s))
    return found
