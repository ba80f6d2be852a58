"""Every line accounted for: an ended batch's lines matched to the requests it was sent (pure
logic; `tests/e2e/test_lost_lines.py` drives the same through the emulator)."""

import polars as pl
import pytest

from maple_engine.collect.accounting import accounting, describe, missing_for_good, tally_lines
from maple_engine.collect.responses import attempt_results, plan_retries, summarize
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import CUSTOM_ID, ROW_ID, BatchState
from maple_engine.policy import job_policy
from maple_engine.providers.base import result_frame

PRICE = ModelPrice(0.15, 0.6, 0.075, 0.0)
PLAN = pl.DataFrame({ROW_ID: [0, 1, 2, 3, 4], CUSTOM_ID: ["r0", "r1", "r2", "r3", "r4"]})
#: r0 twice (a failure, then its answer), r1 failed, r2 answered, r9 never sent; r3, r4 absent
LINES = result_frame(
    {
        "custom_id": ["r0", "r1", "r9", "r0", "r2"],
        "status": ["failed", "failed", "succeeded", "succeeded", "succeeded"],
        "failure_class": ["server_error", "server_error", None, None, None],
        "response": [None, None, "stray", "echo: 0", "echo: 2"],
        "billed": [False, False, True, True, True],
        "input_tokens": [0, 0, 5, 5, 5],
        "output_tokens": [0, 0, 3, 3, 3],
    }
)


def _results(status: str) -> pl.DataFrame:
    state = BatchState("batch_1", status, ended=True)
    return attempt_results(
        PLAN, LINES, state, attempt=1, price=PRICE, batch_pricing=True, schema=None
    )


def test_a_completed_batch_without_a_line_for_a_request_leaves_it_missing_and_resent() -> None:
    results = _results("completed")
    by_row = dict(zip(results[CUSTOM_ID], results["failure_class"], strict=True))
    assert results[CUSTOM_ID].to_list() == ["r0", "r1", "r2", "r3", "r4"]  # r9 is not merged
    assert by_row == {
        "r0": None,
        "r1": "server_error",
        "r2": None,
        "r3": "missing",
        "r4": "missing",
    }
    assert results.filter(pl.col(CUSTOM_ID) == "r0")["response"].item() == "echo: 0"
    assert "without a line for this request" in str(results["error"][3])
    assert results["billed"].sum() == 2  # r0 once, r2; the stray r9 is nobody's
    resent = plan_retries(results, job_policy({}, {})).retry_ids[CUSTOM_ID].to_list()
    assert resent == ["r1", "r3", "r4"]  # missing: resent like expired


@pytest.mark.parametrize(
    ("status", "absent"),
    [
        ("completed", "missing"),
        ("ended", "missing"),
        ("expired", "expired"),
        ("cancelled", "expired"),
    ],
)
def test_an_absent_line_is_missing_only_where_the_batch_says_it_ran_every_request(
    status: str, absent: str
) -> None:
    """A completed OpenAI-style batch and an ended Anthropic one list every request; an
    expired or cancelled batch that lists none for a request never ran it."""
    assert _results(status)["failure_class"].to_list()[3:] == [absent, absent]


def test_the_tally_counts_lines_missing_repeated_and_never_sent() -> None:
    tally = tally_lines(PLAN[CUSTOM_ID], LINES, missing=2)
    assert (tally.missing, tally.duplicated, tally.unknown) == (2, 1, 1)
    assert tally.plus(tally).figures() == {
        "lines_missing": 4,
        "lines_duplicated": 2,
        "lines_unknown": 2,
    }


def test_the_accounting_says_sent_answered_failed_missing() -> None:
    results = _results("completed")
    never_sent = results.head(1).with_columns(
        pl.lit("r5").alias(CUSTOM_ID),
        pl.lit(0, pl.Int64).alias("attempts"),
        pl.lit("failed").alias("status"),
        pl.lit("not_sent").alias("failure_class"),
    )
    figures = accounting(pl.concat([results, never_sent]))
    assert figures == {"sent": 5, "answered": 2, "missing": 2}
    assert describe(figures) == "sent 5, answered 2, failed 1, missing 2"
    info = summarize(results)
    assert (info["sent"], info["answered"], info["missing"]) == (5, 2, 2)


def test_a_missing_row_is_missing_for_good_once_its_retries_are_spent_or_the_job_stopped() -> None:
    results = _results("completed")  # r3 and r4 missing after one send
    assert missing_for_good(results, job_policy({}, {}), stopped=False) == 0  # resent
    assert missing_for_good(results, job_policy({}, {}), stopped=True) == 2
    assert missing_for_good(results, job_policy({"missing": 0}, {}), stopped=False) == 2
