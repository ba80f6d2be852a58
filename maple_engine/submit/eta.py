"""A job's expected finish (ETA): p50 and p90, from the batch history and its batches in flight.

Every place that shows an ETA (``maple status``, the progress line, ``JobHandle.status()``, the
``submissions`` and ``merged`` metadata) reads it from `job_eta`. Each shard not final yet
ends when its batch does: a batch in flight at its submission time plus the turnaround of its
size (`maple_engine.plan.turnaround.TurnaroundFit`, p50 or p90); a batch already older than
that ends from now on, within the spread between the two; a shard still to send starts now
(or when a queue slot frees, given ``in_flight`` requests at once). The job's finish is the
last shard's end plus `COLLECT_S` for collecting and merging (`COLLECT_P90_S` at p90). With no
fit (too little history), no ETA, and the basis says why. It is recomputed from the job's files
at every call, so it follows the batches as they end.
"""

import dataclasses
import heapq
import time
from datetime import UTC, datetime
from typing import Any

from maple_engine.model import is_realtime
from maple_engine.plan.turnaround import TurnaroundFit, history_fit
from maple_engine.report.batch_stats import duration_text
from maple_engine.state import JobState
from maple_engine.submit.stalls import submitted_at

#: seconds after the last batch ends for its collection and the merge (typical; p90)
COLLECT_S = 2.0
COLLECT_P90_S = 5.0


@dataclasses.dataclass(frozen=True)
class Eta:
    """The expected finish (epoch seconds; None: unknown or finished) and what it rests on."""

    p50_at: float | None
    p90_at: float | None
    basis: str

    def in_s(self, now: float | None = None) -> tuple[float | None, float | None]:
        """Seconds from ``now`` to the p50 and p90 finish."""
        now = time.time() if now is None else now
        return _until(self.p50_at, now), _until(self.p90_at, now)

    def text(self, now: float | None = None) -> str:
        """``p50 05:12:03 UTC (in 3m), p90 05:20:40 UTC (in 11m)``, or why there is none."""
        if self.p50_at is None or self.p90_at is None:
            return self.basis
        p50, p90 = self.in_s(now)
        return (
            f"p50 {_clock(self.p50_at)} (in {duration_text(p50)}), "
            f"p90 {_clock(self.p90_at)} (in {duration_text(p90)})"
        )

    def to_json(self) -> dict[str, Any]:
        return {"p50": _iso(self.p50_at), "p90": _iso(self.p90_at), "basis": self.basis}

    def metadata(self) -> dict[str, str]:
        """Materialization metadata: ``eta_p50``, ``eta_p90`` (ISO UTC or "-"), ``eta_basis``."""
        return {
            "eta_p50": _iso(self.p50_at) or "-",
            "eta_p90": _iso(self.p90_at) or "-",
            "eta_basis": self.basis,
        }


def _until(at: float | None, now: float) -> float | None:
    return None if at is None else max(0.0, at - now)


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S UTC")


@dataclasses.dataclass(frozen=True)
class Outstanding:
    """A shard not final: its requests, and when its batch was submitted (None: not yet)."""

    requests: int
    submitted: float | None


def finish_at(
    work: list[Outstanding],
    fit: TurnaroundFit,
    quantile: float,
    now: float,
    in_flight: int | None = None,
) -> float:
    """When the last of ``work`` ends at the fit's ``quantile`` (see the module)."""
    ends = [_flying_end(w, fit, quantile, now) for w in work if w.submitted is not None]
    queued = sorted((w.requests for w in work if w.submitted is None), reverse=True)
    if queued:
        slots = len(queued) if in_flight is None else max(1, in_flight // max(queued))
        free = sorted(ends)[:slots] if in_flight is not None else []
        starts = [max(now, t) for t in free] + [now] * max(0, slots - len(free))
        heapq.heapify(starts)
        for requests in queued:
            start = heapq.heappop(starts)
            end = start + fit.seconds(requests, quantile)
            ends.append(end)
            heapq.heappush(starts, end)
    return max(ends, default=now) + (COLLECT_P90_S if quantile >= 0.9 else COLLECT_S)


def _flying_end(work: Outstanding, fit: TurnaroundFit, quantile: float, now: float) -> float:
    assert work.submitted is not None
    expected = work.submitted + fit.seconds(work.requests, quantile)
    spread = fit.seconds(work.requests, quantile) - fit.seconds(work.requests, 0.5)
    return max(expected, now + spread)


def outstanding(state: JobState) -> list[Outstanding] | None:
    """The job's shards not final (None before it is sharded); real-time attempts are not
    batches and have no turnaround: they count as ending now."""
    manifest = state.manifest()
    if manifest is None:
        return None
    work = []
    for shard in manifest:
        progress = state.progress(shard.key)
        sub = progress.submission
        if progress.action == "wait" and sub is not None and not is_realtime(sub):
            work.append(Outstanding(sub.request_count, submitted_at(sub)))
        elif progress.action == "submit":
            planned = state.plan_rows(shard.key, progress.attempt)
            work.append(Outstanding(shard.rows if planned is None else planned, None))
    return work


def job_eta(
    state: JobState,
    fit: TurnaroundFit | None,
    now: float | None = None,
    in_flight: int | None = None,
) -> Eta:
    """The job's expected finish from its files and ``fit`` (`fit_for`)."""
    now = time.time() if now is None else now
    work = outstanding(state)
    if work is None:
        return Eta(None, None, "not sharded yet")
    if not work:
        return Eta(None, None, "every shard is final")
    if fit is None:
        return Eta(None, None, "no estimate: too little batch history for this provider and model")
    p50, p90 = (finish_at(work, fit, q, now, in_flight) for q in (0.5, 0.9))
    basis = f"{len(work)} shard(s) left; {fit.describe()}"
    return Eta(p50, p90, basis)


def fit_for(state: JobState, costs: Any) -> TurnaroundFit | None:
    """The turnaround fit of the job's provider and model (``costs``: a `CostLedger`, or None
    without a ledger)."""
    spec = (state.read_spec() or {}).get("spec") or {}
    if costs is None or not spec.get("provider") or not spec.get("model"):
        return None
    return history_fit(costs, str(spec["provider"]), str(spec["model"]))


def planned_eta(state: JobState, now: float | None = None) -> dict[str, Any]:
    """For a job that ended: the expected finish its shard sizing planned (``eta_p50``,
    ``eta_p90``; "-" when it made none), when it finished (``finished_at``, now) and whether
    the p90 covered that (``eta_p90_met``)."""
    now = time.time() if now is None else now
    sizing = (state.manifest_record() or {}).get("sizing") or {}
    version = state.version()
    if version is None or sizing.get("p90_s") is None:
        why = sizing.get("reason") or "no deadline or target: no planned finish"
        eta = Eta(None, None, why)
    else:
        start = version.created_at
        eta = Eta(start + sizing["p50_s"], start + sizing["p90_s"], f"planned: {sizing['reason']}")
    met = {} if eta.p90_at is None else {"eta_p90_met": now <= eta.p90_at}
    return {**eta.metadata(), "finished_at": _iso(now), **met}
