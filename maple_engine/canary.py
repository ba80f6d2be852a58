"""The canary: a few rows through the provider before any batch, to stop a bad job cheaply.

With ``--canary N`` (``canary=`` in code) the version's sharding, once every row is rendered,
sends N rows sampled evenly across the input (row ``floor((i + 1/2) * rows / N)`` for i < N, so
a rerun samples the same rows) through the provider's real-time twin (the capabilities record's
``realtime_twin``; a real-time provider sends them itself; a provider with neither sends them as
one small batch). The job goes on only if the share of canary rows that succeeded, and with a
response schema the share of replies that match it, are at least ``canary_min_success``;
otherwise `CanaryFailed` is raised before any batch of the job is created, naming the top
failure class and one example row.

The canary's successes go into the response store like any answer (file ``canary-<n>``), and
the version is planned after it, so those rows are filled from the store and not paid again
(with reuse off they are sent again). Their cost is booked in the cost ledger (shard
``canary``). ``state/canary.json`` records the last canary: a later version of the same job with
the same fingerprint (template, model, provider, parameters, schema...) does not run it again
while that record passed with at least N rows and the current minimum share.
"""

import dataclasses
import time
from collections import Counter
from typing import Any, Literal

import polars as pl

from maple_engine.collect.estimates import text_estimate
from maple_engine.collect.responses import attempt_results, combine_attempts
from maple_engine.errors import CanaryFailed, ConfigError
from maple_engine.failures import FailureClass
from maple_engine.job import Job
from maple_engine.model import CANARY_SHARD, CUSTOM_ID, KEY, REQUEST, ROW_ID, ShardInfo
from maple_engine.plan.estimate import rows_estimate
from maple_engine.providers.base import Lane, ShardPayload
from maple_engine.send.deadline_lanes import realtime_twin
from maple_engine.state import JobState
from maple_engine.steps import book_attempt
from maple_engine.storage.response_store import ResponseStore
from maple_engine.submit.budget import canary_within_budget

SHARD = CANARY_SHARD
MAX_POLL_S = 30.0  # a canary sent as a small batch is polled at most this far apart


@dataclasses.dataclass(frozen=True)
class CanaryReport:
    """What one canary found (``state/canary.json``)."""

    fingerprint: str
    run: int  # 1, 2, ... : the canary's sends of this job
    asked: int  # N of --canary
    sample_size: int  # rows sent: N, or fewer for a small input or repeated requests
    succeeded: int
    success_share: float
    schema_valid_share: float | None  # with a response schema: replies matching it
    min_success: float
    passed: bool
    top_failure: str | None = None  # failure class
    top_failure_rows: int = 0
    example_row: int | None = None
    example_error: str | None = None
    sent_via: str = ""  # the provider the rows went through
    cost_usd: float = 0.0
    at: float = 0.0

    def line(self) -> str:
        """The one line a failed canary stops the job with."""
        shares = f"{self.succeeded} of {self.sample_size} rows succeeded"
        if self.schema_valid_share is not None:
            shares += f", {self.schema_valid_share:.0%} of replies matched the response schema"
        example = f"e.g. row {self.example_row}: {(self.example_error or '').rstrip('.')}"
        return (
            f"canary failed: {shares} (at least {self.min_success:.0%} needed); top failure "
            f"{self.top_failure} ({self.top_failure_rows} rows), {example}. No batch was "
            "created: fix the prompt, schema or model (or lower --canary-min-success) and rerun."
        )

    def metadata(self) -> dict[str, Any]:
        """The figures the ``input_shards`` run shows."""
        return {
            "canary_sample_size": self.sample_size,
            "canary_success_share": round(self.success_share, 4),
            "canary_schema_valid_share": self.schema_valid_share,
            "canary_top_failure": self.top_failure or "none",
            "canary_passed": self.passed,
        }


def sample_rows(rows: int, n: int) -> list[int]:
    """``n`` row ids spread evenly over ``rows`` rows (every row when ``n >= rows``)."""
    if n >= rows:
        return list(range(rows))
    return [(2 * i + 1) * rows // (2 * n) for i in range(n)]


def last_canary(state: JobState) -> CanaryReport | None:
    """The job's last canary (``state/canary.json``), if it ever ran one."""
    record = state.canary_record()
    return None if record is None else CanaryReport(**record)


def still_valid(job: Job, report: CanaryReport | None) -> bool:
    """A passed canary of the same requests, as large and at least as demanding as asked."""
    spec = job.spec
    if report is None or not report.passed or report.fingerprint != spec.fingerprint():
        return False
    schema_share = 1.0 if report.schema_valid_share is None else report.schema_valid_share
    return (
        report.asked >= (spec.canary or 0)
        and min(report.success_share, schema_share) >= spec.canary_min_success
    )


def run_canary(job: Job, shards: list[ShardInfo]) -> CanaryReport | None:
    """Send the canary unless the job asks for none or a valid one passed; raise
    `CanaryFailed` when it fails. Returns the canary that holds for this version (None: none
    does, or the job stopped, on its budget or a cancel while the canary ran)."""
    if not job.spec.canary:
        return None
    earlier = last_canary(job.state)
    if still_valid(job, earlier):
        return earlier
    rows = shards[-1].last_row + 1
    sample = _sample(job, shards, sample_rows(rows, job.spec.canary))
    run = (earlier.run if earlier else 0) + 1
    sender = canary_sender(job)
    check_batch_minimum(sender, sample.height)
    if not _fits_budget(job, sender, shards, sample, run):
        return None  # the job is stopped on its budget: nothing is sent
    results = _send(job, sender, sample, run)
    if job.state.is_stopped():  # `maple cancel` (or a stop) while it ran: no verdict on it
        _store(job, sample, results, run)
        _book(job, sender, results, run)  # what it sent was billed
        return None
    report = judge(job, results, run, sender.wire.provider_name)
    _store(job, sample, results, run)
    _book(job, sender, results, run)
    job.state.write_canary_record(dataclasses.asdict(report) | {"at": time.time()})
    if not report.passed:
        raise CanaryFailed(report.line())
    return report


def _fits_budget(
    job: Job, sender: Lane, shards: list[ShardInfo], sample: pl.DataFrame, run: int
) -> bool:
    if job.spec.budget_usd is None:
        return True
    plan = rows_estimate(
        job.state, job.spec, job.wire.provider_name, shards, sample[ROW_ID].to_list()
    )
    usd = plan.cost(job.price(), batch=_batch_priced(sender))
    return canary_within_budget(job, run, usd, plan.requests)


def _sample(job: Job, shards: list[ShardInfo], ids: list[int]) -> pl.DataFrame:
    """The sampled rows' ids, custom ids, requests and keys (one request per key)."""
    wanted = pl.Series(ids, dtype=pl.Int64).implode()
    parts = [
        job.state.scan_shard(s.key)
        .select(ROW_ID, CUSTOM_ID, REQUEST, KEY)
        .filter(pl.col(ROW_ID).is_in(wanted))
        .collect()
        for s in shards
        if any(s.first_row <= i <= s.last_row for i in ids)
    ]
    return pl.concat(parts).sort(ROW_ID).unique(KEY, keep="first", maintain_order=True)


def canary_sender(job: Job) -> Lane:
    """The lane the canary goes through: the real-time twin, else the provider's own."""
    lane = job.provider  # a deadline's batch lane: its late lanes stand beside it
    wire = lane.wire
    if wire.mode == "batch" and wire.capabilities.realtime_twin is not None:
        return realtime_twin(wire, job.state.storage.root)
    return lane


def check_batch_minimum(sender: Lane, rows: int) -> None:
    """A canary sent as a small batch must reach the provider's smallest batch size."""
    wire = sender.wire
    least = wire.limits().min_requests
    if wire.mode == "batch" and rows < least:
        raise ConfigError(
            f"--canary {rows}: {wire.provider_name} has no real-time API here, so the canary "
            f"goes as one batch, and its batches hold at least {least} requests: give --canary "
            f"{least} or more (the input has enough distinct rows?), or drop --canary."
        )


def _send(job: Job, sender: Lane, sample: pl.DataFrame, run: int) -> pl.DataFrame:
    requests = sample.select(pl.col(CUSTOM_ID).alias("custom_id"), pl.col(REQUEST).alias("request"))
    payload = ShardPayload(
        job.spec.name, SHARD, run, job.spec.model, requests, stopped=job.state.is_stopped
    )
    submission = sender.submit(payload)
    wait = 1.0
    while not (state := sender.poll([submission])[submission.batch_id]).ended:
        time.sleep(wait)  # only a small batch waits: a real-time send has ended on return
        wait = min(wait * 2, MAX_POLL_S)
    return attempt_results(
        sample.select(ROW_ID, CUSTOM_ID),
        sender.results(submission, state),
        state,
        attempt=run,
        price=job.price(),
        batch_pricing=_batch_priced(sender),
        schema=job.spec.response_schema,
        estimate=text_estimate(job.spec, sample.select),
    )


def _batch_priced(sender: Lane) -> bool:
    return sender.wire.mode == "batch" or sender.wire.capabilities.batch_prices


def judge(job: Job, results: pl.DataFrame, run: int, via: str) -> CanaryReport:
    """The canary's shares against the minimum, and its top failure with one example."""
    size = results.height
    ok = results.filter(pl.col("status") == "succeeded")
    share = ok.height / size if size else 1.0
    schema_share = None
    if job.spec.response_schema is not None:
        invalid = results.filter(pl.col("failure_class") == FailureClass.INVALID_OUTPUT.value)
        replied = ok.height + invalid.height
        schema_share = ok.height / replied if replied else 0.0
    minimum = job.spec.canary_min_success
    passed = share >= minimum and (schema_share is None or schema_share >= minimum)
    failed = results.filter(pl.col("status") != "succeeded")
    top, count, row, error = None, 0, None, None
    if failed.height:
        top, count = Counter(failed["failure_class"].to_list()).most_common(1)[0]
        first = failed.filter(pl.col("failure_class") == top).row(0, named=True)
        row, error = int(first[ROW_ID]), " ".join(str(first["error"] or "").split())[:300]
        error = error or "(no message)"
    return CanaryReport(
        fingerprint=job.spec.fingerprint(),
        run=run,
        asked=job.spec.canary or 0,
        sample_size=size,
        succeeded=ok.height,
        success_share=share,
        schema_valid_share=schema_share,
        min_success=minimum,
        passed=passed,
        top_failure=top,
        top_failure_rows=count,
        example_row=row,
        example_error=error,
        sent_via=via,
        cost_usd=round(float(results["cost_usd"].sum()), 6),
    )


def _store(job: Job, sample: pl.DataFrame, results: pl.DataFrame, run: int) -> None:
    """The canary's successes into the response store: the job fills those rows from it.
    Its failures are not stored: the job sends those rows again under its retry policy."""
    ok = combine_attempts([results]).filter(pl.col("status") == "succeeded")
    records = ok.join(sample.select(ROW_ID, KEY), on=ROW_ID, how="inner")
    ResponseStore(job.state.storage, job.spec.name).write(f"{SHARD}-{run}", records, job.spec.model)


def _book(job: Job, sender: Lane, results: pl.DataFrame, run: int) -> None:
    """The canary's spend in the cost ledger, like any attempt's."""
    batch_id = str(results["batch_id"].drop_nulls().first() or f"{SHARD}-{run}")
    mode: Literal["batch", "realtime"] = "batch" if sender.wire.mode == "batch" else "realtime"
    book_attempt(
        job,
        results,
        shard=SHARD,
        attempt=run,
        batch_id=batch_id,
        mode=mode,
        batch_prices=_batch_priced(sender),
    )
