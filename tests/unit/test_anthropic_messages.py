import orjson
import polars as pl

from maple_engine.durations import duration_seconds, seconds_until
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.anthropic.messages import parse_result_line
from maple_engine.providers.anthropic.realtime import AnthropicRealtimeProvider
from maple_engine.providers.base import RequestSpec
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.send.pacing import SAFETY, Pacer

PROVIDER = AnthropicBatchProvider(api_key="unused", intent_root="/nonexistent")


def test_body_has_default_max_tokens_system_image_and_schema() -> None:
    schema = {"type": "object", "properties": {"brand": {"type": "string"}}}
    spec = RequestSpec("claude-haiku-4-5", "Be brief.", {"temperature": 0}, schema)
    frame = pl.DataFrame({"t": ['Brand of "Crème"'], "i": ["https://x.test/a.png"]})
    expr = PROVIDER.body_expr(spec, pl.col("t"), pl.col("i"))
    body = orjson.loads(frame.select(expr)[0, 0])
    assert body["max_tokens"] == 1024 and body["system"] == "Be brief."
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://x.test/a.png"},
    }
    assert body["output_config"]["format"] == {"type": "json_schema", "schema": schema}
    override = RequestSpec("m", params={"max_tokens": 50})
    assert (
        orjson.loads(frame.select(PROVIDER.body_expr(override, pl.col("t"), None))[0, 0])[
            "max_tokens"
        ]
        == 50
    )


def test_encode_and_line_sizes_agree() -> None:
    frame = pl.DataFrame({"custom_id": ["r0", "r1"], "request": ['{"a":1}', '{"b":"é"}']})
    data = PROVIDER.encode(frame)
    assert orjson.loads(data) == {
        "requests": [
            {"custom_id": "r0", "params": {"a": 1}},
            {"custom_id": "r1", "params": {"b": "é"}},
        ]
    }
    sizes = frame.select(PROVIDER.line_bytes_expr(pl.col("custom_id"), pl.col("request")))
    assert sum(sizes.to_series()) == len(data) - len('{"requests":[]}') + 1


def _line(result: dict) -> dict:
    return parse_result_line({"custom_id": "r1", "result": result})


def test_result_types_and_error_types_map_to_failure_classes() -> None:
    def errored(kind: str, message: str = "m") -> str:
        error = {"type": "error", "error": {"type": kind, "message": message}}
        return _line({"type": "errored", "error": error})["failure_class"]

    assert errored("invalid_request_error") == "invalid_request"
    assert errored("invalid_request_error", "image.source: Could not process image") == (
        "invalid_image"
    )
    assert errored("rate_limit_error") == "rate_limited"
    assert errored("overloaded_error") == errored("api_error") == "server_error"
    assert errored("billing_error") == "insufficient_quota"
    assert _line({"type": "expired"})["failure_class"] == "expired"
    assert _line({"type": "canceled"})["failure_class"] == "expired"


def test_usage_counts_cache_tokens_as_input_and_refusal_is_refused() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    message = {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
    row = _line({"type": "succeeded", "message": {**message, "usage": usage}})
    assert (row["status"], row["response"], row["input_tokens"]) == ("succeeded", "hi", 130)
    assert (row["cached_input_tokens"], row["cache_write_tokens"], row["output_tokens"]) == (
        100,
        20,
        5,
    )
    refusal = {"content": [], "stop_reason": "refusal", "usage": usage}
    row = _line({"type": "succeeded", "message": refusal})
    assert (row["status"], row["failure_class"], row["billed"]) == ("failed", "refused", True)


def test_rate_limit_headers() -> None:
    assert duration_seconds("6m0s") == 360 and duration_seconds("120ms") == 0.12
    assert duration_seconds("1h2m3.5s") == 3723.5 and duration_seconds("13s") == 13.0
    assert duration_seconds("2.5") == 2.5 and duration_seconds("soon") is None
    assert seconds_until("2025-08-21T12:41:00Z", 1755780000.0) == 60.0
    openai = OpenAIRealtimeProvider().read_limits(
        {
            "x-ratelimit-limit-requests": "3000",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "20ms",
            "x-ratelimit-limit-tokens": "150000",
        },
        0.0,
    )
    assert (openai.rpm, openai.tpm, openai.remaining_requests) == (3000, 150000, 0)
    assert (
        OpenAIRealtimeProvider().read_limits({"anthropic-ratelimit-requests-limit": "5"}, 0.0).rpm
        is None
    )
    anthropic = AnthropicRealtimeProvider().read_limits(
        {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-tokens-limit": "8000"},
        0.0,
    )
    assert (anthropic.rpm, anthropic.tpm) == (50, 8000)


def test_pacer_spaces_starts_by_requests_and_tokens() -> None:
    pacer = Pacer(rpm=600)
    waits = [pacer.reserve(10, now=0.0) for _ in range(4)]
    assert all(abs(wait - n * 0.1 / SAFETY) < 1e-9 for n, wait in enumerate(waits))
    tokens = Pacer(tpm=6000)  # 100 tokens/s: a 50-token request every ~0.5 s
    tokens.reserve(50, now=0.0)
    assert abs(tokens.reserve(50, now=0.0) - 0.5 / SAFETY) < 1e-9
