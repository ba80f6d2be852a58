"""The budget guard: stop submitting before committed spend plus the next batch exceeds it.

Committed spend = the actual cost of every collected attempt of the current run (its shard
summaries and its canary, the same sums the ledger holds; a budget bounds one run of a living
job) + the
estimates (`maple_engine.plan.estimate`) of batches submitted but not yet collected. Before a new
batch goes out, `within_budget` adds that batch's estimate; if the sum would exceed
``JobSpec.budget_usd`` the job stops (``stop.json`` of kind "budget") and nothing more is
submitted. Batches already in flight finish and are collected, so the job never overshoots
beyond the batch in flight and what estimates under-count. An attempt's estimate is made once
and kept next to its submission (``<shard>/estimate-<n>.json``, `plan.estimate.kept_estimate`,
the same record the provider queue counts its units from), so summing what is in flight reads
small files only.

Resuming: a budget stop records the budget it was hit at (``budget_stop.json``). A later run with
a larger budget (or none) clears the stop (`resume_budget_stop`), and the guard then admits
batches against the new budget.

With a cost ledger (always, under the CLI and the definitions) the admission is one atomic
transaction in the ledger (`maple_engine.ledger.admissions`), so concurrent submission runs (the
daemon's,
a UI run beside a CLI run) can not overshoot the budget by more than one batch in total.
"""

from maple_engine.job import Job
from maple_engine.ledger.costs import CostLedger
from maple_engine.model import CANARY_SHARD, StopKind
from maple_engine.plan.estimate import kept_estimate
from maple_engine.state import JobState

_TOLERANCE = 1e-9


def attempt_estimate(job: Job, shard: str, attempt: int) -> float:
    """Estimated USD of one attempt of one shard, at the job's prices and mode."""
    plan = kept_estimate(job.state, job.spec, job.wire.provider_name, shard, attempt)
    return plan.cost(job.price(), batch=job.batch_prices)


def spent(job: Job) -> float:
    """Actual USD of the current run's collected attempts (its shard summaries): a budget
    bounds one run of a living job, not everything the job ever spent."""
    summaries = (job.state.summary(s.key) for s in job.state.manifest() or [])
    canary = job.state.canary_record()  # the canary of this version, when it ran
    ran = canary is not None and canary.get("fingerprint") == job.spec.fingerprint()
    return sum(s.cost_usd for s in summaries if s is not None) + (
        float(canary.get("cost_usd", 0.0)) if canary is not None and ran else 0.0
    )


def in_flight(job: Job) -> float:
    """Estimated USD of the batches submitted but not collected yet."""
    total = 0.0
    for shard in job.state.manifest() or []:
        progress = job.state.progress(shard.key)
        if progress.action == "wait" and progress.submission is not None:
            total += attempt_estimate(job, shard.key, progress.submission.attempt)
    return total


def within_budget(job: Job, shard: str, attempt: int) -> bool:
    """True if the shard's next batch fits the budget; else
    stop the job with a message that says what to do, and return False."""
    budget = job.spec.budget_usd
    if budget is None:
        return True
    plan = kept_estimate(job.state, job.spec, job.wire.provider_name, shard, attempt)
    nxt = plan.cost(job.price(), batch=job.batch_prices)
    what = f"shard {shard} attempt {attempt}", f"next batch ${nxt:.6f} ({plan.requests:,} requests)"
    return admitted(job, (shard, attempt), nxt, what)


def canary_within_budget(job: Job, run: int, usd: float, requests: int) -> bool:
    """`within_budget` for the canary's ``run``-th send of ``requests`` requests, estimated at
    ``usd``: the canary is spend like any batch, and counts toward the run's budget after it."""
    what = "the canary", f"the canary ${usd:.6f} ({requests:,} requests)"
    return admitted(job, (CANARY_SHARD, run), usd, what)


def admitted(job: Job, attempt: tuple[str, int], usd: float, what: tuple[str, str]) -> bool:
    """Admit the send of ``attempt`` (shard, attempt number) estimated at ``usd`` under the
    job's budget, atomically in the ledger when the job has one; else stop the job with a
    message naming ``what`` (before what, and what the next send costs) and return False."""
    budget = job.spec.budget_usd
    if budget is None:
        return True
    if job.costs is not None:  # one atomic admission in the ledger, shared by every run
        run = {s.key for s in job.state.manifest() or []} | {CANARY_SHARD}  # one run's spend
        admission = job.costs.admit((job.spec.name, *attempt), usd, budget, run)
        ok, paid, flying = admission.admitted, admission.spent_usd, admission.in_flight_usd
    else:
        paid, flying = spent(job), in_flight(job)
        ok = paid + flying + usd <= budget + _TOLERANCE
    if not ok:
        before, nxt = what
        job.state.write_budget_stop(budget)
        job.state.stop(
            f"budget reached before {before}: committed ${paid + flying:.6f} (spent "
            f"${paid:.6f} + in flight ${flying:.6f}) + {nxt} > budget ${budget:.6f}; rerun "
            "with a larger --budget to continue",
            kind=StopKind.BUDGET,
        )
    return ok


def resume_budget_stop(state: JobState, budget: float | None) -> str | None:
    """Lift a budget stop when the job now has a larger budget (or none): the lifted reason."""
    record = state.stop_record()
    if record is None or state.stop_kind() is not StopKind.BUDGET:
        return None
    hit = state.budget_stop()
    if budget is not None and hit is not None and budget <= hit:
        return None
    lifted = state.clear_stop((StopKind.BUDGET,))
    state.clear_budget_stop()
    return lifted


def ledger_totals(
    costs: CostLedger | None, job: str, shards: set[str] | None = None
) -> dict[str, float]:
    """The job's ledger totals (of ``shards`` only, when given: one run's): paid, the same
    usage at real-time prices, and the saving."""
    entries = costs.job_entries(job) if costs is not None else []
    if shards is not None:
        entries = [e for e in entries if e.shard in shards]
    paid = sum(e.cost_usd for e in entries)
    realtime = sum(e.realtime_cost_usd for e in entries)
    uncached = sum(
        e.cost_usd if e.uncached_cost_usd is None else e.uncached_cost_usd for e in entries
    )
    return {
        "ledger_cost_usd": round(paid, 6),
        "realtime_cost_usd": round(realtime, 6),
        "uncached_cost_usd": round(uncached, 6),
        "cache_savings_usd": round(uncached - paid, 6),
        "savings_usd": round(realtime - paid, 6),
    }
