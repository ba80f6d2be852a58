"""The steps of an enrichment, shared by the assets, the sensor and the CLI driver.

Each step reads and writes the job's durable state (``maple_engine.state``) and is idempotent:
running it again after a crash at any point converges on the same files and never creates a
second provider batch for an attempt that already has one.
"""

import time
from typing import Literal

import polars as pl

from maple_engine.collect.accounting import tally_lines
from maple_engine.collect.estimates import text_estimate
from maple_engine.collect.gone_urls import check_urls
from maple_engine.collect.responses import (
    attempt_results,
    combine_attempts,
    fit_vectors,
    plan_retries,
    schema_misfit,
    summarize,
    with_final,
)
from maple_engine.collect.shard_responses import final_before
from maple_engine.crashpoints import crash_point
from maple_engine.errors import ConfigError, QuotaExhausted
from maple_engine.failures import FailureClass, batch_too_large
from maple_engine.job import Job
from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import (
    CUSTOM_ID,
    KEY,
    REALTIME_PREFIX,
    REQUEST,
    ROW_ID,
    BatchState,
    LineTally,
    StopKind,
    Submission,
    batch_priced,
    priority_priced,
)
from maple_engine.providers.base import LOST_SENDS, ShardPayload
from maple_engine.providers.http import RETRY_LOG_EVERY_S, log
from maple_engine.providers.reply_fit import ReplyFit
from maple_engine.state import ShardSummary
from maple_engine.storage.claims import claim_batch
from maple_engine.storage.response_store import ResponseStore, collection
from maple_engine.submit import queue
from maple_engine.submit.budget import within_budget


# -- submissions ----------------------------------------------------------------------------
def _plan(job: Job, shard: str, attempt: int) -> pl.DataFrame:
    plan = job.state.plan(shard, attempt)
    if plan is None:  # written when the version was planned; a shard of old state sends all
        plan = job.state.shard_frame(shard, columns=[ROW_ID, CUSTOM_ID])
        job.state.write_plan(shard, attempt, plan)
    return plan


def _adopt(job: Job, shard: str, attempt: int, digest: str) -> Submission | None:
    orphan = job.orphan(shard, attempt)
    return orphan if orphan is not None and orphan.content_hash in {digest, ""} else None


def payload_for(job: Job, shard: str, attempt: int) -> ShardPayload:
    plan = _plan(job, shard, attempt)
    frame = job.state.shard_frame(shard, columns=[CUSTOM_ID, REQUEST])
    requests = frame.join(plan.select(CUSTOM_ID), on=CUSTOM_ID, how="semi", maintain_order="left")
    requests = requests.rename({CUSTOM_ID: "custom_id", REQUEST: "request"})
    budget = job.policy.budget(_sent_before(job, shard, attempt))
    stopped = job.state.is_stopped
    return ShardPayload(
        job.spec.name,
        shard,
        attempt,
        job.spec.model,
        requests,
        budget,
        stopped,
        priority=job.spec.priority,
        fit=ReplyFit(
            embedding=job.spec.kind.answer == "vector",
            dimensions=job.spec.dimensions,
            schema=job.spec.response_schema,
        ),
    )


def _sent_before(job: Job, shard: str, attempt: int) -> dict[str, int]:
    """Each row's sends in the shard's earlier attempts (the rows attempt n-1 left pending)."""
    if attempt == 1 or not job.state.storage.exists(job.state.paths.results(shard, attempt - 1)):
        return {}
    earlier = job.state.results(shard, attempt - 1).select(CUSTOM_ID, "attempts")
    return dict(zip(earlier[CUSTOM_ID].to_list(), earlier["attempts"].to_list(), strict=True))


def check_age(job: Job) -> None:
    stored = job.state.read_spec() or {}
    age = time.time() - float(stored.get("created_at", time.time()))
    if age > job.policy.max_job_age_s:
        job.state.stop(
            f"the job is {age / 3600:.1f} h old, past its max age of "
            f"{job.policy.max_job_age_s / 3600:.1f} h: no more retries are sent",
            kind=StopKind.AGE,
        )


QUOTA_ADVICE = (
    "no new batches are sent; top up the account, then rerun the same command to send the "
    "remaining rows"
)


def submit_shard(job: Job, shard: str, chain: queue.Chain | None = None) -> Submission | None:
    """Send the shard's next attempt unless it is already out, done, or the job has stopped.
    ``chain``: the run sends its shards one after another (`maple_engine.submit.queue.Chain`)."""
    progress = job.state.progress(shard)
    if progress.action != "submit" or job.state.stop_reason() is not None:
        return progress.submission
    if progress.attempt > 1:
        check_age(job)
    if job.state.stop_reason() is not None:
        return None
    attempt = progress.attempt
    return claim_batch(
        job.state.storage,
        job.state.paths.claim(shard, attempt),
        lambda: job.state.submission(shard, attempt),
        lambda taken_over: _create(job, shard, attempt, taken_over, chain),
    )


def _create(
    job: Job, shard: str, attempt: int, taken_over: bool, chain: queue.Chain | None = None
) -> Submission | None:
    """Under the attempt's claim: adopt the batch a dead claimant created, else create one."""
    if job.state.stop_reason() is not None:
        return None
    if taken_over:
        job.forget_orphans()  # the previous claimant may have created the batch
    payload = payload_for(job, shard, attempt)
    digest = payload.encoded(job.wire.encode)[1]  # encoded once: adoption and upload
    submission = _adopt(job, shard, attempt, digest)
    if submission is None:
        if not queue.admitted(job, shard, attempt, chain):
            return None  # no room in the provider's queue yet: the sensor asks again later
        if not within_budget(job, shard, attempt):
            return None  # the job is stopped: committed spend + this batch > budget
        try:
            submission = queue.submit(job, payload, chain)
        except QuotaExhausted as exc:  # the batch was refused: stop as a row's quota error does
            job.state.stop(f"{exc}; {QUOTA_ADVICE}", kind=StopKind.QUOTA)
            return None
        if submission is None:
            return None  # the provider refused it as queue-full: it waits again
    crash_point("after_create")
    job.state.record_submission(submission)
    return submission


# -- raw_responses --------------------------------------------------------------------------
def collect_shard(job: Job, shard: str, state: BatchState) -> pl.DataFrame:
    """Parse the ended batch of the shard's latest attempt, merge attempts, plan retries.

    Each answer is written once: the outcomes this attempt made final go to the response store,
    the rows still pending to ``results-n``. Every write is a whole file derived from the
    provider's result files and earlier attempts, so running it again after a crash at any
    point converges on the same state. Returns the shard's responses (`shard_responses`).
    """
    progress = job.state.progress(shard)
    submission = progress.submission
    if submission is None:
        raise ConfigError(f"shard {shard} of job {job.spec.name} has no batch waiting")
    attempt = submission.attempt
    lines = job.submission_lane(submission).results(submission, state)
    plan = _plan(job, shard, attempt)
    results = attempt_results(
        plan,
        lines,
        state,
        attempt=attempt,
        price=attempt_price(job, submission.batch_id),
        batch_pricing=batch_priced(submission.batch_id),
        standard=job.price(),
        schema=job.spec.response_schema,
        estimate=text_estimate(job.spec, lambda columns: job.state.shard_frame(shard, columns)),
    )
    tally = _shard_tally(progress.summary, attempt, plan, lines, results)
    results, misfit = fit_vectors(results, job.spec.dimensions)
    misfit = misfit or schema_misfit(results, job.spec.response_schema)
    if misfit is not None:  # the rows are sent again on the rerun after the fix, not now
        job.state.stop(misfit, kind=StopKind.REPLY)
    earlier = [job.state.results(shard, attempt - 1)] if attempt > 1 else []
    results = check_urls(job, shard, results, earlier)
    combined = combine_attempts([*earlier, results])  # every row not final before this attempt
    decision = plan_retries(combined, job.policy)
    keep_answers(job, (shard, attempt), combined, decision.retry_ids)
    crash_point("after_results")
    lost = lines.filter(pl.col(LOST_SENDS) > 0) if LOST_SENDS in lines.columns else None
    _record_cost(job, shard, submission, results, lost)
    if decision.quota_exhausted:
        reason = f"the provider reports insufficient quota: {QUOTA_ADVICE}"
        job.state.stop(reason, kind=StopKind.QUOTA)
    cap = _attempt_cap(progress.summary, state, plan.height)
    pending = decision.retry_ids.height
    if pending:
        retry = combined.filter(pl.col(CUSTOM_ID).is_in(decision.retry_ids[CUSTOM_ID].implode()))
        if not job.state.is_stopped():  # a stopped job sends them on its rerun, not now
            _say_retrying(job, shard, attempt + 1, retry)
        retry = retry.select(ROW_ID, CUSTOM_ID)
        job.state.write_plan(shard, attempt + 1, retry.head(cap) if cap else retry)
    crash_point("before_summary")
    responses = with_final(final_before(job.state, shard, attempt), combined)
    info = summarize(responses)
    summary = ShardSummary(
        attempt,
        pending,
        pending == 0,
        info["succeeded"],
        info["failed"],
        info["cost_usd"],
        cap,
        tally.missing,
        tally.duplicated,
        tally.unknown,
    )
    job.state.write_summary(shard, summary)
    return responses


def _shard_tally(
    previous: ShardSummary | None,
    attempt: int,
    plan: pl.DataFrame,
    lines: pl.DataFrame,
    results: pl.DataFrame,
) -> LineTally:
    """The line tally of the shard's attempts up to ``attempt``: the ``previous`` summary's
    (that of the attempt before), plus this one's ``lines`` against its ``plan``."""
    missing = int((results["failure_class"] == FailureClass.MISSING.value).sum())
    tally = tally_lines(plan[CUSTOM_ID], lines, missing)
    if previous is not None and 0 < previous.attempt < attempt:
        tally = previous.tally().plus(tally)
    return tally


_said = {"at": -RETRY_LOG_EVERY_S}


def _say_retrying(job: Job, shard: str, attempt: int, retry: pl.DataFrame) -> None:
    """One line when rows are planned for another attempt, at most one every 30 s a process
    (a job of many shards retries in many): how many, of which classes, in which attempt."""
    now = time.monotonic()
    if now - _said["at"] < RETRY_LOG_EVERY_S:
        return
    _said["at"] = now
    counts = retry.group_by("failure_class").len().sort("failure_class").iter_rows()
    classes = ", ".join(f"{cls} {count}" for cls, count in counts)
    log.warning(
        "retrying %d rows of job %s shard %s in attempt %d (%s)",
        retry.height,
        job.spec.name,
        shard,
        attempt,
        classes,
    )


def keep_answers(
    job: Job, at: tuple[str, int], combined: pl.DataFrame, retry_ids: pl.DataFrame
) -> None:
    """Write each row a shard's attempt (``at``) combined once: the outcomes the attempt made
    final (no retry left) to the response store, every other row (to retry, or left pending by
    a stop) to ``results-n``, which the next attempt combines with its own."""
    shard, attempt = at
    made_final = (pl.col("attempt") == attempt) & ~pl.col(CUSTOM_ID).is_in(
        retry_ids[CUSTOM_ID].implode()
    )
    job.state.write_results(shard, attempt, combined.filter(~made_final))
    final = combined.filter(made_final)  # stored even if empty: it replaces an earlier run's
    keys = job.state.shard_frame(shard, columns=[ROW_ID, KEY])
    records = final.join(keys, on=ROW_ID, how="inner")
    ResponseStore(job.state.storage, job.spec.name).write(
        collection(shard, attempt), records, job.spec.model
    )


def _attempt_cap(previous: ShardSummary | None, state: BatchState, sent: int) -> int:
    """Requests per attempt from now on: halved each time a batch is rejected as too large."""
    cap = previous.max_requests if previous is not None else 0
    if state.status == "failed" and sent > 1 and batch_too_large(state.error_codes, state.errors):
        cap = max(1, (min(cap, sent) if cap else sent) // 2)
    return cap


def _mode(job: Job, submission: Submission) -> Literal["batch", "realtime"]:
    """How the attempt was sent: a deadline sends batch jobs' late attempts real-time."""
    if job.mode != "batch" or submission.batch_id.startswith(REALTIME_PREFIX):
        return "realtime"
    return "batch"


def attempt_price(job: Job, batch_id: str) -> ModelPrice:
    """The price of the attempt ``batch_id``: the job's, or its priority tier's."""
    price = job.price()
    return price.at_priority() if priority_priced(batch_id) else price


def _record_cost(
    job: Job,
    shard: str,
    submission: Submission,
    results: pl.DataFrame,
    lost: pl.DataFrame | None = None,
) -> None:
    """Book the attempt's billed rows; ``lost``: each row's sends whose answers a killed run
    never recorded (``LOST_SENDS``), booked again at the usage of the answer that replaced
    them, as the provider billed them."""
    mode, batch_prices = _mode(job, submission), batch_priced(submission.batch_id)
    billed = results.filter(pl.col("billed"))
    if lost is not None and lost.height:
        again = billed.join(lost.select("custom_id", LOST_SENDS), on="custom_id", how="inner")
        copies = pl.exclude(LOST_SENDS).repeat_by(pl.col(LOST_SENDS))
        billed = pl.concat([billed, again.select(copies).explode(billed.columns)])
    book_attempt(
        job,
        billed,
        shard=shard,
        attempt=submission.attempt,
        batch_id=submission.batch_id,
        mode=mode,
        batch_prices=batch_prices,
    )


def book_attempt(
    job: Job,
    results: pl.DataFrame,
    *,
    shard: str,
    attempt: int,
    batch_id: str,
    mode: Literal["batch", "realtime"],
    batch_prices: bool,
) -> None:
    """The billed rows of one attempt (or of the canary) as one entry of the cost ledger."""
    if job.costs is None:
        return
    entry = AttemptCost.from_rows(
        results.filter(pl.col("billed")),
        job.price(),
        priority=priority_priced(batch_id),
        job=job.spec.name,
        team=job.spec.team,
        model=job.spec.model,
        provider=job.wire.provider_name,
        mode=mode,
        batch_prices=batch_prices,
        shard=shard,
        attempt=attempt,
        batch_id=batch_id,
    )
    job.costs.record(entry)
