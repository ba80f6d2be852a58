"""Wire formats of the Gemini and Bedrock providers: request bodies, result parsing, error
classes, labels."""

import re

import orjson
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from maple_engine.errors import ConfigError
from maple_engine.providers.base import RequestSpec
from maple_engine.providers.bedrock import wire as bedrock_wire
from maple_engine.providers.gemini import wire as gemini_wire
from maple_engine.providers.gemini.batch import GeminiBatchProvider

JOB_NAME = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}")  # Bedrock's pattern


def render(expr: pl.Expr, text: str, image: str | None = None) -> dict[str, object]:
    frame = pl.DataFrame({"u": [text], "i": [image]})
    value: dict[str, object] = orjson.loads(frame.select(expr).item())
    return value


def test_gemini_body_with_system_params_and_schema() -> None:
    schema = {"type": "object", "properties": {"brand": {"type": "string"}}}
    spec = RequestSpec("gemini-2.5-flash", "Be brief.", {"max_tokens": 32, "top_p": 0.5}, schema)
    body = render(gemini_wire.gemini_body_expr(spec, pl.col("u"), pl.col("i")), 'a "b"', "u://x")
    assert body == {
        "contents": [
            {"role": "user", "parts": [{"text": 'a "b"'}, {"fileData": {"fileUri": "u://x"}}]}
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "maxOutputTokens": 32,
            "topP": 0.5,
            "responseMimeType": "application/json",
            "responseJsonSchema": schema,
        },
    }


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40))
def test_gemini_line_bytes_match_the_encoded_file(text: str) -> None:
    provider = GeminiBatchProvider(api_key="k")
    spec = RequestSpec("gemini-2.5-flash")
    requests = pl.DataFrame({"custom_id": ["r1"], "t": [text]}).select(
        "custom_id", provider.body_expr(spec, pl.col("t"), None).alias("request")
    )
    size = requests.select(provider.line_bytes_expr(pl.col("custom_id"), pl.col("request"))).item()
    assert size == len(provider.encode(requests))


def test_gemini_response_parsing() -> None:
    ok = {
        "candidates": [
            {
                "content": {"parts": [{"text": "thinking", "thought": True}, {"text": "hi"}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "cachedContentTokenCount": 4,
            "candidatesTokenCount": 3,
            "thoughtsTokenCount": 5,
        },
    }
    row = gemini_wire.parse_result_line({"key": "r1", "response": ok})
    assert row["custom_id"] == "r1" and row["response"] == "hi" and row["status"] == "succeeded"
    assert (row["input_tokens"], row["cached_input_tokens"], row["output_tokens"]) == (10, 4, 8)
    blocked = gemini_wire.parse_generate_response(
        "r2", {"promptFeedback": {"blockReason": "SAFETY"}}
    )
    assert blocked["failure_class"] == "refused" and blocked["resendable"] is False
    refused = gemini_wire.parse_generate_response(
        "r2", {"candidates": [{"finishReason": "SAFETY"}]}
    )
    assert refused["failure_class"] == "refused" and refused.get("resendable") is None
    inline = {"metadata": {"key": "r3"}, "error": {"code": 14, "message": "try again"}}
    assert gemini_wire.parse_result_line(inline)["failure_class"] == "server_error"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down"}, "rate_limited"),
        ({"code": 8, "message": "check your plan and billing details"}, "insufficient_quota"),
        ({"code": 13, "status": "INTERNAL"}, "server_error"),
        ({"code": 503, "status": "UNAVAILABLE"}, "server_error"),
        ({"code": 3, "status": "INVALID_ARGUMENT", "message": "bad image"}, "invalid_image"),
        ({"code": 400, "status": "INVALID_ARGUMENT"}, "invalid_request"),
    ],
)
def test_gemini_status_classes(status: dict[str, object], expected: str) -> None:
    assert gemini_wire.classify_status(status) == expected


def test_bedrock_claude_body_and_model_check() -> None:
    spec = RequestSpec("anthropic.claude-3-haiku-20240307-v1:0", "Sys", {"temperature": 0})
    body = render(bedrock_wire.claude_body_expr(spec, pl.col("u"), None), "x")
    assert body == {
        "messages": [{"role": "user", "content": "x"}],
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 1024,
        "temperature": 0,
        "system": "Sys",
    }
    with pytest.raises(ConfigError, match="Anthropic Claude"):
        bedrock_wire.claude_body_expr(RequestSpec("meta.llama3"), pl.col("u"), None)
    with pytest.raises(ConfigError, match="base64"):
        bedrock_wire.claude_body_expr(spec, pl.col("u"), pl.col("i"))


def test_bedrock_output_lines() -> None:
    message = {"content": [{"type": "text", "text": "yo"}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 5, "output_tokens": 2}}  # fmt: skip
    row = bedrock_wire.parse_output_line({"recordId": "r1", "modelOutput": message})
    assert (row["response"], row["input_tokens"], row["billed"]) == ("yo", 5, True)
    error = {"recordId": "r2", "error": {"errorCode": 429, "errorMessage": "Throttled"}}
    assert bedrock_wire.parse_output_line(error)["failure_class"] == "rate_limited"
    error = {"recordId": "r3", "error": {"errorCode": 400, "errorMessage": "bad"}}
    assert bedrock_wire.parse_output_line(error)["failure_class"] == "invalid_request"


@given(st.text(max_size=80), st.integers(1, 999))
def test_bedrock_job_names_fit_the_api_pattern(job: str, attempt: int) -> None:
    name = bedrock_wire.job_name(job, "s00012", attempt)
    assert JOB_NAME.fullmatch(name) and len(name) <= 63


def test_bedrock_input_labels_round_trip() -> None:
    uri = "s3://b/root/my_job/bedrock/input/s00003-a2-0123abcd.jsonl"
    assert bedrock_wire.parse_input_name(uri) == ("s00003", 2, "0123abcd")
    assert bedrock_wire.parse_input_name("s3://b/other.jsonl") is None


def test_google_retry_info_sets_the_wait() -> None:
    import httpx

    from maple_engine.providers.gemini.api import retry_wait as retry_after_seconds
    from maple_engine.providers.http import retry_after_seconds as standard_wait

    detail = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [detail]}}
    assert retry_after_seconds(httpx.Response(429, json=body)) == 13.0
    assert retry_after_seconds(httpx.Response(429, json={"error": {"code": 429}})) is None
    assert retry_after_seconds(httpx.Response(429, headers={"retry-after": "2"})) == 2.0
    assert standard_wait(httpx.Response(429, json=body)) is None  # Google's own, in its folder
