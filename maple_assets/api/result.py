"""What one run of a job did: the figures ``maple enrich`` prints, ``enrich()`` returns and
``maple_job`` records as metadata.

Outcomes (rows, succeeded, failed by class) are the whole output's. ``sent``, the tokens and
``cost_usd`` are this run's own: rows answered by batches this run submitted, and what they
cost; a resumed run does not count what an earlier run sent (nor the rows an interrupted
real-time attempt had answered before it was resumed), and a row the job stopped before
sending is ``not_sent``, never ``sent``. ``reused`` rows were answered from the response store.
"""

import dataclasses
from typing import Any, Literal

from maple_engine.collect.accounting import describe, line_figures
from maple_engine.collect.responses import NOT_SENT, add_summary, summarize
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.model import LineTally
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.submit.deadline import deadline_split

Status = Literal["succeeded", "rows_failed", "stopped"]
STATUSES: tuple[Status, ...] = ("succeeded", "rows_failed", "stopped")


FIGURES = ("cost_usd", "input_tokens", "output_tokens")  # per batch, beside its rows


def job_status(totals: dict[str, Any], stop: dict[str, str] | None) -> Status:
    """``stopped`` (budget, quota, cancel, max age), else ``rows_failed`` or ``succeeded``."""
    if stop is not None:
        return "stopped"
    return "rows_failed" if int(totals.get("failed", 0)) > 0 else "succeeded"


@dataclasses.dataclass(frozen=True)
class Result:
    """One run of a job, to its end or its stop."""

    job: str
    status: Status
    rows: int
    succeeded: int
    failed: int
    failed_by_class: dict[str, int]
    sent: int  # rows this run sent and got an answer or a failure for
    reused: int  # rows answered from the response store (paid by an earlier run)
    not_sent: int  # rows never sent: the job stopped first (a rerun sends them)
    input_tokens: int
    output_tokens: int
    cost_usd: float  # this run's new spend
    realtime_cost_usd: float  # this run's usage at real-time prices (the cost ledger)
    saved_usd: float  # ... minus what this run paid
    output: str
    stopped: str | None = None  # why the job stopped early
    deadline: dict[str, Any] | None = None  # with a deadline: rows by batch and by real-time
    cached_tokens: int = 0  # of input_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # written to the prompt cache
    cache_saved_usd: float = 0.0  # what this run's cache reads and writes saved
    uncached_cost_usd: float = 0.0  # this run's tokens at prices without the cache
    reasoning_tokens: int = 0  # of output_tokens, those the model spent reasoning
    #: every line accounted for (`maple_engine.collect.accounting`), over the version's rows
    #: sent: ``sent``, ``answered``, ``failed``, ``missing`` (still without a line)
    lines: dict[str, int] = dataclasses.field(default_factory=dict)
    #: over every attempt: lines missing from ended batches (each resent), lines beyond one per
    #: request and lines for requests never sent (each ignored)
    lines_missing: int = 0
    lines_duplicated: int = 0
    lines_unknown: int = 0
    #: with --distill: rows distilled, the agreement measured and its sample, the costs
    #: (``maple_assets.api.distill.DistillReport``)
    distill: dict[str, Any] | None = None
    # rows this run's provider served at the standard tier though another was asked (a
    # priority request over its limit), billed at the standard price
    downgraded: int = 0

    def metadata(self) -> dict[str, Any]:
        """The figures as Dagster metadata values (no secrets: paths, counts and money)."""
        figures = dataclasses.asdict(self)
        figures["failed_by_class"] = dict(self.failed_by_class)
        figures["stopped"] = self.stopped or ""
        figures["deadline"] = dict(self.deadline or {})
        figures["lines"] = describe(self.lines)
        figures["distill"] = dict(self.distill or {})
        return figures


def recorded_batches(state: JobState) -> set[str]:
    """The batch ids of every submission the job has recorded (taken before a run starts:
    the batches of earlier runs)."""
    return {
        sub.batch_id for shard in state.manifest() or [] for sub in state.submissions(shard.key)
    }


def carried_batches(state: JobState) -> set[str]:
    """The batch ids of rows that a resumed real-time attempt carried from an earlier run
    interrupted before it recorded them (a kill): that run's, not the one resuming it."""
    return {
        batch
        for shard in state.manifest() or []
        for sub in state.submissions(shard.key)
        for batch in sub.carried
    }


def job_totals(state: JobState) -> dict[str, Any]:
    """The merge's totals, or (no merge yet) the shard summaries added up."""
    totals: dict[str, Any] = {}
    merged = state.merged_record()
    if merged is not None:
        totals = dict(merged.get("totals") or {})
    if not totals:
        from maple_engine.collect.shard_responses import shard_responses

        for shard in state.manifest() or []:
            add_summary(totals, summarize(shard_responses(state, shard.key)))
    return totals


def job_result(
    state: JobState, output: str, costs: CostLedger, spec: JobSpec, earlier: set[str]
) -> Result:
    """The run's ``Result``; ``earlier``: ``recorded_batches`` before it started."""
    totals = job_totals(state)
    earlier = earlier | carried_batches(state)
    by_batch = totals.get("by_batch")
    if by_batch is None:  # no merge record: every row the shards sent counts as this run's
        figures = (*FIGURES, "cached_input_tokens", "cache_write_tokens", "reasoning_tokens")
        this_run = [{"rows": totals.get("sent", 0)} | {k: totals.get(k, 0) for k in figures}]
    else:
        this_run = [figures for batch, figures in by_batch.items() if batch not in earlier]
    shards = {s.key for s in state.manifest() or []}
    entries = [e for e in costs.job_entries(state.job) if e.shard in shards]
    ours = [e for e in entries if e.batch_id not in earlier]  # the ledger: this run's batches
    paid, realtime = sum(e.cost_usd for e in ours), sum(e.realtime_cost_usd for e in ours)
    uncached = sum(
        e.uncached_cost_usd if e.uncached_cost_usd is not None else e.cost_usd for e in ours
    )
    by_class = {str(k): int(v) for k, v in (totals.get("failed_by_class") or {}).items()}
    stop = state.stop_record()
    tally = job_tally(state)
    return Result(
        job=state.job,
        status=job_status(totals, stop),
        rows=int(totals.get("rows", 0)),
        succeeded=int(totals.get("succeeded", 0)),
        failed=int(totals.get("failed", 0)),
        failed_by_class=by_class,
        sent=sum(int(f["rows"]) for f in this_run),
        reused=int(totals.get("reused", 0)),
        not_sent=by_class.get(NOT_SENT, 0),
        input_tokens=sum(int(f["input_tokens"]) for f in this_run),
        output_tokens=sum(int(f["output_tokens"]) for f in this_run),
        cost_usd=float(sum(float(f["cost_usd"]) for f in this_run)),
        realtime_cost_usd=float(realtime),
        saved_usd=float(realtime - paid),
        output=output,
        stopped=state.stop_reason(),
        deadline=_deadline(costs, state.job, shards, spec),
        cached_tokens=sum(int(f.get("cached_input_tokens", 0)) for f in this_run),
        cache_write_tokens=sum(int(f.get("cache_write_tokens", 0)) for f in this_run),
        cache_saved_usd=float(uncached - paid),
        uncached_cost_usd=float(uncached),
        reasoning_tokens=sum(int(f.get("reasoning_tokens", 0)) for f in this_run),
        lines=line_figures(totals),
        lines_missing=tally.missing,
        lines_duplicated=tally.duplicated,
        lines_unknown=tally.unknown,
        downgraded=sum(e.downgraded_requests for e in ours),
    )


def job_tally(state: JobState) -> LineTally:
    """The line tallies of the job's shards, added up."""
    tally = LineTally()
    for shard in state.manifest() or []:
        summary = state.summary(shard.key)
        if summary is not None:
            tally = tally.plus(summary.tally())
    return tally


def _deadline(
    costs: CostLedger, job: str, shards: set[str], spec: JobSpec
) -> dict[str, Any] | None:
    if spec.deadline_s is None:
        return None
    price = PriceBook(costs.prices).price(spec.model, spec.provider, allow_untracked=True)
    return dict(deadline_split(costs, job, shards, price))
