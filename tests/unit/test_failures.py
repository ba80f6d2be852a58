"""The failure taxonomy, retry planning, batch splitting and job stops (pure logic, no HTTP)."""

import time
from pathlib import Path

import polars as pl
import pydantic
import pytest

from maple_engine.collect.responses import (
    IMAGE_GONE,
    plan_retries,
    schema_misfit,
    unrun_failure,
    validate_structured,
)
from maple_engine.crashpoints import CrashPointReached, crash_point
from maple_engine.failures import batch_too_large
from maple_engine.inputs.structured import schema_dtype
from maple_engine.job import Job
from maple_engine.model import CUSTOM_ID, ROW_ID, BatchState, StopKind
from maple_engine.policy import RetryPolicy, job_policy
from maple_engine.providers.openai.batch import OpenAIBatchProvider, _parse_line
from maple_engine.spec import JobSpec, schema_dict
from maple_engine.state import JobState, ShardSummary
from maple_engine.steps import _attempt_cap, check_age
from maple_engine.storage.storage import Storage


@pytest.mark.parametrize(
    ("line", "cls"),
    [
        # shape 1: the request never ran (response null, error object)
        ({"custom_id": "r1", "response": None, "error": {"code": "batch_expired"}}, "expired"),
        ({"custom_id": "r1", "response": None, "error": {"code": "batch_cancelled"}}, "expired"),
        ({"custom_id": "r1", "response": None, "error": {"code": "server_error"}}, "server_error"),
        ({"custom_id": "r1", "response": None, "error": {"code": "x_unknown"}}, "invalid_request"),
        # shape 2: it ran and answered an HTTP error (response.body.error)
        (
            {
                "custom_id": "r1",
                "response": {
                    "status_code": 429,
                    "body": {"error": {"code": "rate_limit_exceeded"}},
                },
                "error": None,
            },
            "rate_limited",
        ),
    ],
)
def test_openai_line_error_shapes(line: dict[str, object], cls: str) -> None:
    assert _parse_line(line)["failure_class"] == cls


@pytest.mark.parametrize(
    ("status", "code", "etype", "cls"),
    [
        (500, None, "server_error", "server_error"),
        (400, "invalid_image_url", "invalid_request_error", "invalid_image"),
        (429, "insufficient_quota", "insufficient_quota", "insufficient_quota"),
        (400, None, "invalid_request_error", "invalid_request"),
    ],
)
def test_openai_http_error_lines(status: int, code: str | None, etype: str, cls: str) -> None:
    body = {"error": {"message": "m", "type": etype, "code": code}}
    line = {"custom_id": "r1", "response": {"status_code": status, "body": body}, "error": None}
    parsed = _parse_line(line)
    assert (parsed["status"], parsed["failure_class"], parsed["billed"]) == ("failed", cls, False)


def test_a_refusal_is_billed_and_refused() -> None:
    body = {
        "choices": [{"message": {"content": None, "refusal": "no"}}],
        "usage": {"prompt_tokens": 3},
    }
    parsed = _parse_line({"custom_id": "r", "response": {"status_code": 200, "body": body}})
    assert (parsed["failure_class"], parsed["billed"]) == ("refused", True)


def _failed_batch(code: str, message: str = "") -> BatchState:
    return BatchState("b1", "failed", True, errors=(message,), error_codes=(code,))


def test_a_too_large_batch_is_split_until_it_fits() -> None:
    too_many = _failed_batch("too_many_tasks", "The input file has 12 requests")
    assert batch_too_large(too_many.error_codes, too_many.errors)
    assert unrun_failure(too_many, can_split=True)[0] == "expired"
    assert unrun_failure(too_many, can_split=False)[0] == "invalid_request"
    assert _attempt_cap(None, too_many, 12) == 6
    assert _attempt_cap(ShardSummary(2, 12, False, max_requests=6), too_many, 6) == 3
    ok = BatchState("b2", "completed", True)
    assert _attempt_cap(ShardSummary(3, 9, False, max_requests=3), ok, 3) == 3  # kept
    assert unrun_failure(_failed_batch("model_mismatch"), can_split=True)[0] == "invalid_request"


@pytest.mark.parametrize("code", ["runner_lost", "internal_error", "server_error"])
def test_a_batch_the_service_failed_by_its_own_fault_leaves_its_rows_to_resend(code: str) -> None:
    # LiteLLM fails a batch it runs itself "runner_lost" when its proxy replica stopped before
    # the batch finished, and says to resubmit it: that is no fault of the input
    lost = _failed_batch(
        code, "the proxy replica running this batch stopped before it finished; resubmit the batch"
    )
    cls, message = unrun_failure(lost, can_split=False)
    assert cls == "server_error" and "failed at the provider, not for its input" in message
    assert RetryPolicy().allows(cls, sends=1)


def _combined(rows: list[tuple[str, int, str]], resendable: list[bool | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            ROW_ID: list(range(len(rows))),
            CUSTOM_ID: [f"r{i}" for i in range(len(rows))],
            "status": ["failed"] * len(rows),
            "failure_class": [r[0] for r in rows],
            "attempts": [r[1] for r in rows],
            "error": [r[2] for r in rows],
            "resendable": pl.Series(resendable, dtype=pl.Boolean),
        }
    )


def test_retry_plan_follows_the_policy_and_queues_quota_rows() -> None:
    combined = _combined(
        [
            ("refused", 2, "no"),  # its 1 retry used up
            ("refused", 1, "no"),
            ("invalid_request", 1, "bad"),
            ("insufficient_quota", 1, "quota"),  # queued behind the stop
            ("invalid_image", 1, f"{IMAGE_GONE}image URL x answered HTTP 404"),
            ("invalid_image", 1, "Invalid image URL"),
            ("rate_limited", 40, "429"),
        ],
        [None, None, None, None, False, None, None],
    )
    decision = plan_retries(combined, RetryPolicy())
    assert decision.quota_exhausted
    assert decision.retry_ids[CUSTOM_ID].to_list() == ["r1", "r3", "r5", "r6"]
    stingy = RetryPolicy().with_overrides({"rate_limited": 0, "refused": 5})
    assert plan_retries(combined, stingy).retry_ids[CUSTOM_ID].to_list() == ["r0", "r1", "r3", "r5"]


def test_max_job_age_stops_the_job_with_a_reason(tmp_path: Path) -> None:
    state = JobState(Storage(str(tmp_path)), "old")
    state.write_spec({"fingerprint": "f", "created_at": time.time() - 7200, "spec": {}})
    job = Job(JobSpec(name="old", prompt="p", model="m"), state, OpenAIBatchProvider())
    check_age(job)
    assert state.stop_reason() is None
    job.policy = RetryPolicy(max_job_age_s=3600)
    check_age(job)
    assert "past its max age of 1.0 h" in (state.stop_reason() or "")
    assert (
        state.clear_stop((StopKind.QUOTA, StopKind.CANCEL)) is None
    )  # an age stop is not lifted by a rerun
    assert state.clear_stop((StopKind.AGE,)) is not None and state.stop_reason() is None


def test_crash_point_is_inert_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    crash_point("after_create")
    monkeypatch.setenv("MAPLE_CRASH_AT", "after_create")
    monkeypatch.setenv("MAPLE_CRASH_MODE", "raise")
    crash_point("after_upload")
    with pytest.raises(CrashPointReached):
        crash_point("after_create")


class _Attributes(pydantic.BaseModel):
    brand: str
    size_ml: int


def test_pydantic_response_schema_and_invalid_output() -> None:
    schema = schema_dict(_Attributes)
    assert schema is not None and schema["required"] == ["brand", "size_ml"]
    assert schema_dtype(schema) == pl.Struct({"brand": pl.String, "size_ml": pl.Int64})
    frame = pl.DataFrame(
        {
            "status": ["succeeded", "succeeded", "succeeded", "failed"],
            "failure_class": [None, None, None, "refused"],
            "error": [None, None, None, "no"],
            "response": ['{"brand":"b","size_ml":5}', '{"brand":"b"}', "not json", None],
        }
    )
    checked = validate_structured(frame, schema)
    assert checked["status"].to_list() == ["succeeded", "failed", "failed", "failed"]
    assert checked["failure_class"].to_list() == [
        None,
        "invalid_output",
        "invalid_output",
        "refused",
    ]
    assert checked["parsed"].to_list() == ['{"brand":"b","size_ml":5}', None, None, None]


def test_a_batch_whose_replies_all_fail_the_schema_stops_the_job() -> None:
    """Two replies, none matching: the server ignores the format. One match (or one reply, or
    only refusals) is no such sign: those rows are resent under the retry policy."""
    schema = schema_dict(_Attributes)

    def checked(*responses: str | None) -> pl.DataFrame:
        return validate_structured(
            pl.DataFrame(
                {
                    "status": ["succeeded" if r else "failed" for r in responses],
                    "failure_class": [None if r else "refused" for r in responses],
                    "error": [None if r else "no" for r in responses],
                    "response": list(responses),
                }
            ),
            schema,
        )

    reason = schema_misfit(checked("Acme", '{"brand": "b"}'), schema)
    assert reason is not None and "2 different rows' replies did not match" in reason
    assert "ignores the response format" in reason
    assert schema_misfit(checked("Acme", '{"brand":"b","size_ml":5}'), schema) is None
    assert schema_misfit(checked("Acme"), schema) is None
    assert schema_misfit(checked(None, None), schema) is None
    assert schema_misfit(checked("Acme", "Acme"), None) is None


def test_a_refusal_is_resent_only_when_a_resend_can_change_it() -> None:
    combined = _combined(
        [
            ("refused", 1, "the model refused"),
            ("refused", 1, "not resent: the prompt was blocked before generation"),
        ],
        [None, False],
    )
    sampled = plan_retries(combined, job_policy({}, {"temperature": 0.7}))
    assert sampled.retry_ids[CUSTOM_ID].to_list() == ["r0"]  # never the blocked prompt
    assert plan_retries(combined, job_policy({}, {"temperature": 0})).retry_ids.is_empty()
    assert plan_retries(combined, job_policy({}, {"top_k": 1})).retry_ids.is_empty()
    asked = job_policy({"refused": 3}, {"temperature": 0})  # the user's word wins
    assert plan_retries(combined, asked).retry_ids[CUSTOM_ID].to_list() == ["r0"]


@pytest.mark.parametrize(
    "error",
    [
        "not resent: the prompt was blocked before generation",
        "the prompt was blocked before generation; it will not be sent again",
        "",
        None,
    ],
)
def test_a_row_marked_not_resendable_stays_failed_whatever_its_error_says(
    error: str | None,
) -> None:
    """The retry plan reads ``resendable``, not the error text: a row marked False is not
    retried though its class allows more sends, one with null is, whatever either's words."""
    combined = _combined([("server_error", 1, "x"), ("server_error", 1, "x")], [False, None])
    combined = combined.with_columns(pl.lit(error, pl.String).alias("error"))
    policy = RetryPolicy()
    assert policy.allows("server_error", 1)  # the class's policy would send both again
    assert plan_retries(combined, policy).retry_ids[CUSTOM_ID].to_list() == ["r1"]
