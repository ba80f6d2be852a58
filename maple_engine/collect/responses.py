"""raw_responses: turn a finished batch into per-row results, merge attempts, plan retries."""

import dataclasses
from typing import Any

import polars as pl

from maple_engine.collect.accounting import RAN_EVERY_REQUEST, accounting, one_line_each
from maple_engine.collect.estimates import Estimate, with_estimates
from maple_engine.failures import SERVICE_FAILURE_CODES, FailureClass, batch_too_large
from maple_engine.ledger.pricing import ModelPrice, cost_expr, served_standard
from maple_engine.model import CUSTOM_ID, REUSED, ROW_ID, BatchState
from maple_engine.policy import RetryPolicy
from maple_engine.providers.base import RESULT_SCHEMA
from maple_engine.providers.reply_fit import SCHEMA_STRIKES, SchemaCheck, schema_ignored
from maple_engine.providers.vectors import base64_length, misfit_reason, vector_values

# A row's sends become its ``attempts``; the tier it was served on prices its attempt (and is
# booked with it), not kept with its answer.
_LINE = [c for c in RESULT_SCHEMA if c not in {"sends", "served_tier"}]
ATTEMPT_COLUMNS = [
    ROW_ID, CUSTOM_ID, *_LINE, "cost_usd", "parsed", "attempt", "attempts", "served_tier"
]  # fmt: skip
#: A shard's responses: each row's latest attempt, how often it was sent, the cost of all sends.
RESPONSE_COLUMNS = [ROW_ID, CUSTOM_ID, *_LINE, "parsed", "attempt", "attempts", "cost_usd"]
#: Columns a frame made before they existed lacks (the ``results-n`` of a shard an older Maple
#: collected, lines built without them): read as null, which leaves a resend to the failure
#: class's retries, as before the column. The response store fills its own (`response_store`).
ADDED_COLUMNS: dict[str, pl.DataType] = {"resendable": pl.Boolean()}


def with_added(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each ``ADDED_COLUMNS`` column it lacks as nulls."""
    missing = [pl.lit(None, t).alias(c) for c, t in ADDED_COLUMNS.items() if c not in frame]
    return frame.with_columns(missing) if missing else frame


def unrun_failure(state: BatchState, can_split: bool = False) -> tuple[str, str]:
    """Class and message for requests absent from an ended batch's result files.

    A batch that says it ran every request (`RAN_EVERY_REQUEST`) and holds no line for one
    lost it: ``missing``, resent. Rows a batch never ran (window passed, cancelled, lost) are
    ``expired``: resent in a new batch. A failed batch's rows take its class (`failed_batch`).
    """
    if state.status == "failed":
        return failed_batch(state, can_split)
    if state.status in RAN_EVERY_REQUEST:
        return (
            FailureClass.MISSING.value,
            f"batch {state.batch_id} ended {state.status} without a line for this request in "
            "its output or error file; resent",
        )
    return (
        FailureClass.EXPIRED.value,
        f"batch {state.batch_id} ended ({state.status}) before the request ran",
    )


def failed_batch(state: BatchState, can_split: bool) -> tuple[str, str]:
    """Class and message for the rows of a failed batch. A batch rejected as too large that
    can still be split leaves them ``expired`` (resent in smaller batches); one the service
    failed by its own fault (`SERVICE_FAILURE_CODES`), ``server_error``: sent again, within
    that class's retries."""
    codes = set(state.error_codes)
    message = "; ".join(state.errors) or "the provider failed the batch"
    if codes & {"token_limit_exceeded", "rate_limit_exceeded"}:
        return FailureClass.RATE_LIMITED.value, message
    if "insufficient_quota" in codes:
        return FailureClass.INSUFFICIENT_QUOTA.value, message
    if codes & SERVICE_FAILURE_CODES:
        return (
            FailureClass.SERVER_ERROR.value,
            f"batch {state.batch_id} failed at the provider, not for its input: {message}",
        )
    if can_split and batch_too_large(state.error_codes, state.errors):
        return (
            FailureClass.EXPIRED.value,
            f"batch {state.batch_id} was rejected as too large ({message}); "
            "resent in smaller batches",
        )
    return (
        FailureClass.INVALID_REQUEST.value,
        f"batch {state.batch_id} failed validation: {message}",
    )


def attempt_results(
    plan: pl.DataFrame,
    lines: pl.DataFrame,
    state: BatchState,
    *,
    attempt: int,
    price: ModelPrice,
    batch_pricing: bool,
    schema: dict[str, Any] | None,
    estimate: Estimate | None = None,
    standard: ModelPrice | None = None,
) -> pl.DataFrame:
    """One row per planned request: the provider's line, or an 'unrun' failure if it has none.
    A billed reply that reported no usage gets its tokens from ``estimate`` (and is marked).
    A row the provider says it served at the ``standard`` tier (``served_tier``: a priority
    request over its limit) costs the ``standard`` real-time price (default ``price``)."""
    lines = with_added(one_line_each(lines))
    if "served_tier" not in lines.columns:  # lines a provider built before the column
        lines = lines.with_columns(pl.lit(None, pl.String).alias("served_tier"))
    cls, message = unrun_failure(state, can_split=plan.height > 1)
    joined = plan.join(
        lines, left_on=CUSTOM_ID, right_on="custom_id", how="left", maintain_order="left"
    )
    joined = with_estimates(joined, estimate)
    missing = pl.col("status").is_null()
    frame = joined.with_columns(
        pl.when(missing)
        .then(pl.lit(cls))
        .otherwise(pl.col("failure_class"))
        .alias("failure_class"),
        pl.when(missing).then(pl.lit(message)).otherwise(pl.col("error")).alias("error"),
        pl.col("status").fill_null("failed"),
        pl.col("billed").fill_null(False),
        pl.col("batch_id").fill_null(state.batch_id),
        *(pl.col(c).fill_null(0) for c in _TOKENS),
    ).with_columns(pl.col(CUSTOM_ID).alias("custom_id"))
    frame = validate_structured(frame, schema)
    cost = (
        pl.when(pl.col("billed") & served_standard())
        .then(cost_expr(standard or price, batch=False))
        .when(pl.col("billed"))
        .then(cost_expr(price, batch=batch_pricing))
        .otherwise(0.0)
    )
    sends = pl.col("sends") if "sends" in frame.columns else pl.lit(None, pl.Int64)
    return frame.with_columns(
        cost.alias("cost_usd"),
        pl.lit(attempt, pl.Int64).alias("attempt"),
        sends.fill_null(1).cast(pl.Int64).alias("attempts"),
    ).select(ATTEMPT_COLUMNS)


_TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
#: The usage figures summed per shard and job: the tokens, and of the output the reasoning
#: (null where the provider does not report it, counted as none).
SUMMED = (*_TOKENS, "reasoning_tokens")


def fit_vectors(frame: pl.DataFrame, length: int | None) -> tuple[pl.DataFrame, str | None]:
    """With ``--dimensions``, a vector of another length can never fit the job: its row is
    ``invalid_output`` (billed, not kept, sent again on a rerun), and the reason is returned."""
    if length is None or frame.is_empty():
        return frame, None
    encoded = base64_length(length)
    wrong = (pl.col("status") == "succeeded") & (pl.col("response").str.len_bytes() != encoded)
    first = frame.filter(wrong).head(1)
    if first.is_empty():
        return frame, None
    reason = misfit_reason(vector_values(str(first["response"].item())), length)
    return frame.with_columns(
        *_invalid_output(wrong, pl.lit(reason)),
        pl.when(wrong).then(None).otherwise(pl.col("response")).alias("response"),
    ), reason


def schema_misfit(frame: pl.DataFrame, schema: dict[str, Any] | None) -> str | None:
    """With a response schema, a batch of two or more replies none of which matched it (its
    rows ``invalid_output``) says the server or model ignores the response format: the reason
    the job stops, instead of resending every row under the retry policy."""
    if schema is None or (frame["status"] == "succeeded").any():
        return None
    invalid = frame.filter(pl.col("failure_class") == FailureClass.INVALID_OUTPUT.value)
    problems = invalid["error"].drop_nulls()
    problems = problems.filter(problems.str.starts_with("the reply "))  # the schema's verdicts
    if problems.len() < SCHEMA_STRIKES:
        return None
    return schema_ignored(problems.len(), str(problems[0]))


def _invalid_output(wrong: pl.Expr | pl.Series, error: pl.Expr | pl.Series) -> list[pl.Expr]:
    """``status``, ``failure_class`` and ``error`` with the ``wrong`` rows failed as
    ``invalid_output`` saying ``error``."""
    return [
        pl.when(wrong).then(pl.lit("failed")).otherwise(pl.col("status")).alias("status"),
        pl.when(wrong)
        .then(pl.lit(FailureClass.INVALID_OUTPUT.value))
        .otherwise(pl.col("failure_class"))
        .alias("failure_class"),
        pl.when(wrong).then(error).otherwise(pl.col("error")).alias("error"),
    ]


def validate_structured(frame: pl.DataFrame, schema: dict[str, Any] | None) -> pl.DataFrame:
    """With a response schema, a reply that does not parse or validate is ``invalid_output``."""
    if schema is None:
        return frame.with_columns(pl.lit(None, pl.String).alias("parsed"))
    validator = SchemaCheck(schema)
    problems: list[str | None] = []
    for status, text in zip(frame["status"], frame["response"], strict=True):
        problems.append(validator.problem(text) if status == "succeeded" else None)
    bad = pl.Series("problem", problems, dtype=pl.String)
    is_bad = bad.is_not_null()
    return frame.with_columns(
        *_invalid_output(is_bad, bad),
        pl.when((pl.col("status") == "succeeded") & ~is_bad)
        .then(pl.col("response"))
        .otherwise(None)
        .alias("parsed"),
    )


def combine_attempts(attempts: list[pl.DataFrame]) -> pl.DataFrame:
    """Per row: the latest attempt's outcome, how often it was sent, the cost of all attempts.

    A frame may be an earlier combination (with ``attempts``, its rows' sends so far, and their
    summed cost): the rows a shard's last collection left pending."""
    if len(attempts) == 1:  # the common case
        return _with_sends(attempts[0]).sort(ROW_ID)
    every = pl.concat([_with_sends(a) for a in attempts], how="vertical_relaxed")
    totals = every.group_by(ROW_ID).agg(
        pl.col("attempts").sum().cast(pl.Int64), pl.col("cost_usd").sum().alias("total_cost_usd")
    )
    latest = every.sort("attempt").unique(subset=ROW_ID, keep="last").drop("attempts")
    return (
        latest.join(totals, on=ROW_ID)
        .drop("cost_usd")
        .rename({"total_cost_usd": "cost_usd"})
        .select(RESPONSE_COLUMNS)
        .sort(ROW_ID)
    )


def _with_sends(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in response columns; an attempt's rows without a count were each sent once."""
    if "attempts" not in frame.columns:
        frame = frame.with_columns(pl.lit(1, pl.Int64).alias("attempts"))
    return with_added(frame).select(RESPONSE_COLUMNS)


def stored_responses(records: pl.DataFrame) -> pl.DataFrame:
    """A shard's response-store records (with the rows they answered) as responses."""
    return records.with_columns(pl.col(CUSTOM_ID).alias("custom_id")).select(RESPONSE_COLUMNS)


def with_final(final: pl.DataFrame | None, pending: pl.DataFrame) -> pl.DataFrame:
    """A shard's responses: the rows earlier collections made final (``final``, from the
    response store), then every other row's latest outcome (``pending``). In no row order:
    readers join by row id or take row ranges, and a sort would copy every answer of the
    shard once more (50k embeddings: 70 MB)."""
    pending = with_added(pending)
    if final is None:
        return pending
    if pending.is_empty():
        return final
    rest = pending.join(final.select(ROW_ID), on=ROW_ID, how="anti")
    return pl.concat([final, rest], how="vertical_relaxed", rechunk=False)


#: The start of the error of an ``invalid_image`` row whose image was checked and found gone
#: (for people: the row is marked ``resendable`` False, which is what keeps it from a resend).
IMAGE_GONE = "not resent: the image is gone: "
#: The same for an ``invalid_file`` row whose file URL was found gone.
FILE_GONE = "not resent: the file is gone: "


@dataclasses.dataclass(frozen=True)
class RetryDecision:
    retry_ids: pl.DataFrame  # custom ids to send again (all of them; an attempt may take a part)
    quota_exhausted: bool


def plan_retries(combined: pl.DataFrame, policy: RetryPolicy) -> RetryDecision:
    """The failed rows the policy sends again, whether or not the job is stopped right now.

    ``insufficient_quota`` rows never ran: they stay queued behind the job's quota stop, so a
    rerun after a top-up sends them. A row marked ``resendable`` False (an image found gone, a
    prompt blocked before generating, an answer a gateway may have billed) stays failed whatever
    its class allows; a null leaves it to the class's retries. The error text plays no part.
    """
    failed = combined.filter(pl.col("status") == "failed")
    quota_value = FailureClass.INSUFFICIENT_QUOTA.value
    quota = bool((failed["failure_class"] == quota_value).any())
    allowed = [
        cls == quota_value or (resendable is not False and policy.allows(cls, sends))
        for cls, sends, resendable in zip(
            failed["failure_class"], failed["attempts"], failed["resendable"], strict=True
        )
    ]
    retry = failed.filter(pl.Series(allowed, dtype=pl.Boolean))
    return RetryDecision(retry.select(CUSTOM_ID), quota)


def summarize(combined: pl.DataFrame) -> dict[str, Any]:
    """Counts and sums for materialization metadata and the CLI summary."""
    # one pass of expressions: filtering the frame first copied every column, answers included
    ok = pl.col("status") == "succeeded"
    failed = pl.col("status") == "failed"
    tokens = SUMMED
    sums = combined.select(
        ok.sum().alias("succeeded"),
        failed.sum().alias("failed"),
        *(pl.col(name).filter(ok).sum().alias(name) for name in tokens),
        pl.col("cost_usd").sum(),
        pl.col("attempts").max().fill_null(0),
    ).row(0, named=True)
    classes = combined.select("status", "failure_class").filter(failed)
    by_class = dict(classes.group_by("failure_class").len().iter_rows())
    lines = accounting(combined)
    return {
        "rows": combined.height,
        "succeeded": int(sums["succeeded"] or 0),
        "failed": int(sums["failed"] or 0),
        "failed_by_class": {str(k): int(v) for k, v in sorted(by_class.items(), key=str)},
        "sent": lines["sent"],  # rows sent at least once, and of them (`accounting`):
        "answered": lines["answered"],
        "missing": lines["missing"],
        **{name: int(sums[name] or 0) for name in tokens},
        "cost_usd": float(sums["cost_usd"] or 0.0),
        "attempts": int(sums["attempts"] or 0),
    }


def add_summary(total: dict[str, Any], info: dict[str, Any]) -> None:
    """Accumulate one shard's ``summarize`` into a job total (counts, tokens, cost, classes)."""
    for key, value in info.items():
        if key == "failed_by_class":
            classes = total.setdefault(key, {})
            for cls, count in value.items():
                classes[cls] = classes.get(cls, 0) + count
        elif key == "attempts":
            total[key] = max(total.get(key, 0), value)
        else:
            total[key] = total.get(key, 0) + value


NOT_SENT = "not_sent"
"""Failure class of rows never sent: the job stopped (budget, quota, cancel, age) first."""

EMPTY_TEXT = "empty_text"
"""Failure class of an embedding's row whose text is empty: never sent, nothing billed."""
EMPTY_TEXT_ERROR = "the text to embed is empty: not sent (nothing billed)"


def unsent_responses(rows: pl.DataFrame, reason: str, cls: str = NOT_SENT) -> pl.DataFrame:
    """Responses for a shard that was never submitted: each row failed, unbilled, 0 attempts."""
    return rows.select(ROW_ID, CUSTOM_ID).with_columns(
        pl.col(CUSTOM_ID).alias("custom_id"),
        pl.lit("failed").alias("status"),
        pl.lit(cls).alias("failure_class"),
        pl.lit(reason, pl.String).alias("error"),
        pl.lit(None, pl.Boolean).alias("resendable"),
        pl.lit(None, pl.String).alias("response"),
        pl.lit(False).alias("billed"),
        *(pl.lit(0, pl.Int64).alias(c) for c in _TOKENS),
        pl.lit(None, pl.Int64).alias("reasoning_tokens"),
        pl.lit(None, pl.Boolean).alias("tokens_estimated"),
        pl.lit(None, pl.String).alias("batch_id"),
        pl.lit(None, pl.String).alias("parsed"),
        pl.lit(0, pl.Int64).alias("attempt"),
        pl.lit(0, pl.Int64).alias("attempts"),
        pl.lit(0.0).alias("cost_usd"),
    )


def fill_responses(found: pl.DataFrame) -> pl.DataFrame:
    """Responses of the rows a version did not send, from their stored records.

    A row with no stored record is the copy of a request this run sent and did not answer
    (its retries are pending, or the job stopped): it is failed, ``not_sent``."""
    if found.is_empty():
        return found
    missing = pl.col("status").is_null()
    reason = "not sent: an identical request of this run (sent once for all) was not answered"
    return found.with_columns(
        (~missing).alias(REUSED),
        pl.col("status").fill_null("failed"),
        pl.when(missing)
        .then(pl.lit(NOT_SENT))
        .otherwise(pl.col("failure_class"))
        .alias("failure_class"),
        pl.when(missing).then(pl.lit(reason)).otherwise(pl.col("error")).alias("error"),
        *(pl.col(c).fill_null(0) for c in (*_TOKENS, "attempts")),
        pl.col("cost_usd").fill_null(0.0),
    ).drop("model", "at", strict=False)


def add_run_summary(total: dict[str, Any], sent: pl.DataFrame, filled: pl.DataFrame) -> None:
    """Accumulate a shard into a run total: outcomes over every row; tokens and cost over what
    this version sent (reused answers were paid before); rows sent (a row the job stopped
    before sending is ``not_sent``, not sent) and reused; and per batch, the rows it answered
    and their cost (``by_batch``: a driver tells this run's batches from earlier runs')."""
    add_summary(total, summarize(sent))
    went = sent.filter(pl.col("attempts") > 0) if "attempts" in sent.columns else sent
    by_batch = total.setdefault("by_batch", {})
    if went.height and "batch_id" in went.columns:
        figures = ("cost_usd", "input_tokens", "output_tokens", *_TOKENS[1:3], "reasoning_tokens")
        per_batch = went.group_by("batch_id").agg(
            pl.len().alias("rows"), *(pl.col(c).fill_null(0).sum() for c in figures)
        )
        for row in per_batch.iter_rows(named=True):
            batch = by_batch.setdefault(str(row.pop("batch_id")), {})
            for key, value in row.items():
                batch[key] = batch.get(key, 0) + value
    if filled.height:
        info = summarize(filled)
        for key in ("rows", "succeeded", "failed"):
            total[key] = total.get(key, 0) + info[key]
        classes = total.setdefault("failed_by_class", {})
        for cls, count in info["failed_by_class"].items():
            classes[cls] = classes.get(cls, 0) + count
        total["reused"] = total.get("reused", 0) + int(filled[REUSED].sum())
