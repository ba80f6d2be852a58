"""The retry budget and what tells a job error from a row's: a row's sends across attempts, the
refusals that concern the job's setup, and the gateway's own message kept."""

import httpx
import polars as pl
import pytest

from maple_engine.collect.responses import attempt_results, combine_attempts
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import CUSTOM_ID, ROW_ID, BatchState
from maple_engine.policy import UNLIMITED, RetryPolicy, SendBudget
from maple_engine.providers.base import result_frame
from maple_engine.providers.http import error_detail, safe_url, setup_refusal

RETRIES = {"server_error": 5, "rate_limited": UNLIMITED, "invalid_request": 0}


@pytest.mark.parametrize(
    ("failure_class", "sent_before", "cap", "left"),
    [
        ("server_error", 0, 6, 6),  # 1 + 5 in all
        ("server_error", 4, 6, 2),  # 4 sent by earlier attempts
        ("server_error", 9, 6, 1),  # spent: the send made counts, no more
        ("server_error", 0, 3, 3),  # the provider's own cap
        ("rate_limited", 40, 6, 6),  # unlimited: the cap of one attempt
        ("invalid_request", 0, 6, 1),
        ("unknown_class", 0, 6, 1),  # no retries for a class the policy does not name
    ],
)
def test_sends_left_count_the_earlier_attempts(
    failure_class: str, sent_before: int, cap: int, left: int
) -> None:
    budget = SendBudget(RETRIES, {"r1": sent_before})
    assert budget.sends_left(failure_class, "r1", cap) == left


def test_the_policy_counts_every_send_of_the_budget() -> None:
    policy = RetryPolicy(retries=RETRIES)
    budget = policy.budget({"r1": 2})
    sends = 2 + budget.sends_left("server_error", "r1", 6)
    assert sends == 6 and not policy.allows("server_error", sends)  # no attempt after it
    assert policy.allows("server_error", sends - 1)


def _answer(status: int, body: bytes) -> httpx.Response:
    return httpx.Response(status, content=body, request=httpx.Request("POST", "http://x/v1"))


@pytest.mark.parametrize(
    ("status", "body", "setup"),
    [
        (401, b'{"error": {"message": "Incorrect API key provided"}}', True),
        (404, b'{"error": {"message": "The model `x` does not exist", "code": null}}', True),
        (400, b'{"status": "failure", "message": "x-portkey-provider header is required"}', True),
        (400, b'{"error": {"message": "bad", "code": "unsupported_parameter"}}', True),
        (400, b'{"error": {"message": "\'response_format\' of type json_schema is not supported"}}',
         True),
        (400, b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. '
              b'However, your messages resulted in 9000 tokens."}}', False),
        (400, b'{"error": {"message": "Invalid image URL", "code": "invalid_image_url"}}', False),
        (500, b'{"error": {"message": "model not found upstream"}}', False),
        (429, b'{"error": {"message": "Rate limit reached"}}', False),
    ],
)  # fmt: skip
def test_setup_refusals_are_told_from_a_rows_own(status: int, body: bytes, setup: bool) -> None:
    assert setup_refusal(_answer(status, body)) is setup


def test_a_gateways_own_message_shape_is_read() -> None:
    body = b'{"status": "failure", "message": "No connected db."}'
    assert error_detail(_answer(400, body))[0] == "No connected db."


def test_urls_lose_what_may_hold_a_secret() -> None:
    url = "https://user:sk-secret@gw.example.com:8443/v1/chat/completions?key=sk-secret"
    assert safe_url(url) == "https://gw.example.com:8443/v1/chat/completions"


def test_llm_attempts_count_every_send_of_a_real_time_attempt() -> None:
    plan = pl.DataFrame({ROW_ID: [0, 1, 2], CUSTOM_ID: ["a", "b", "c"]})
    lines = result_frame(
        {
            "custom_id": ["a", "b"],
            "status": ["succeeded", "failed"],
            "failure_class": [None, "server_error"],
            "billed": [True, False],
            "sends": [3, 6],  # a retried twice, b spent its budget; c has no line
        }
    )
    state = BatchState("rt-j-s00000-2", "completed", ended=True)
    price = ModelPrice(0.15, 0.6, 0.075, 0.0)
    results = attempt_results(
        plan, lines, state, attempt=2, price=price, batch_pricing=False, schema=None
    )
    earlier = results.head(0).with_columns(pl.lit(0, pl.Int64).alias("attempts"))
    combined = combine_attempts([earlier, results])
    assert combined["attempts"].to_list() == [3, 6, 1]
    assert not RetryPolicy(retries=RETRIES).allows("server_error", 6)
