"""Pure pieces: token counting, fault specs, schema instances, durations, the fast path."""

import jsonschema
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.config import EmulatorConfig, parse_fail
from emulator.core.faults import FaultDrawer
from emulator.core.ratelimit import RateLimiter, go_duration
from emulator.core.replies import instance_for_schema, invalid_instance
from emulator.core.tokens import count_tokens, prompt_tokens
from emulator.openai.batch_lines import fast_chat
from emulator.openai.engine import OpenAIEngine


def test_count_tokens_formula() -> None:
    assert [count_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [1, 1, 1, 2, 100]


@given(st.text())
def test_count_tokens_is_the_documented_formula(text: str) -> None:
    assert count_tokens(text) == max(1, (len(text) + 3) // 4)


def test_prompt_tokens_include_system_and_overheads() -> None:
    messages = [{"role": "user", "content": "abcdefgh"}]
    assert prompt_tokens(messages) == 3 + (2 + 3)
    assert prompt_tokens(messages, system="abcd") == 3 + (2 + 3) + (1 + 3)


def test_parse_fail() -> None:
    assert parse_fail(["rate_limited=0.2", "refused=1"]) == {"rate_limited": 0.2, "refused": 1.0}
    with pytest.raises(ValueError, match="valid classes: rate_limited"):
        parse_fail(["nonsense=0.1"])
    with pytest.raises(ValueError, match="CLASS=RATE"):
        parse_fail(["rate_limited"])
    with pytest.raises(ValueError, match="between 0 and 1"):
        parse_fail(["rate_limited=2"])


SCHEMAS = [
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "minimum": 5}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"x": {"type": "number"}}},
                "minItems": 2,
            }
        },
    },
    {
        "type": "object",
        "properties": {
            "kind": {"enum": ["p", "q"]},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        },
    },
    {
        "type": "object",
        "properties": {
            "ref": {"$ref": "#/$defs/Inner"},
            "when": {"type": "string", "format": "date"},
        },
        "$defs": {
            "Inner": {
                "type": "object",
                "properties": {"v": {"type": ["string", "null"], "minLength": 40}},
            }
        },
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_instances_validate(schema: dict[str, object]) -> None:
    jsonschema.validate(instance_for_schema(schema, "echo: x"), schema)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_invalid_instances_do_not(schema: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(invalid_instance(schema, "echo: x"), schema)


def test_go_durations() -> None:
    assert [go_duration(s) for s in (0.12, 1.0, 1.5, 62.0)] == ["120ms", "1s", "1.5s", "1m2s"]


def test_fault_draws_are_deterministic() -> None:
    one, two = FaultDrawer(5, {"server_error": 0.5}), FaultDrawer(5, {"server_error": 0.5})
    draws = [one.draw(k, image=False, schema=False) for k in range(200)]
    assert draws == [two.draw(k, image=False, schema=False) for k in range(200)]
    assert 60 < draws.count("server_error") < 140


def test_fast_path_matches_general_path() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ],
        "max_tokens": 50,
    }
    quick = fast_chat(body)
    assert quick is not None
    outcome = OpenAIEngine(FaultDrawer(0, {}), 16).run("/v1/chat/completions", body)
    assert orjson.loads(quick[0]) == outcome.body["choices"][0]["message"]["content"]
    assert quick[1:] == (outcome.prompt_tokens, outcome.completion_tokens)
    assert fast_chat(body | {"response_format": {"type": "json_object"}}) is None


def test_config_rejects_bad_faults() -> None:
    with pytest.raises(ValueError, match="unknown fault class"):
        EmulatorConfig(fail={"boom": 0.1})


@pytest.mark.parametrize("burst", [1.0, 2.0, 60.0])
def test_limiter_enforces_the_limit_over_burst_windows(burst: float) -> None:
    limiter = RateLimiter(rpm=3000, tpm=None, burst_seconds=burst)
    start = 1_200_000.0  # a window boundary for every burst length above
    admitted = [limiter.check(1, now=start + i * 0.0002).allowed for i in range(4000)]
    holds = round(3000 * burst / 60)
    assert sum(admitted) == min(holds, 4000) and all(admitted[:holds])
    refused = limiter.check(1, now=start + 3.9999)
    if burst < 4:  # a later window admits again; a minute bucket still refuses until it resets
        assert refused.allowed
    else:
        assert not refused.allowed and 56 < refused.retry_after <= 60
        assert refused.requests[1] == 0  # remaining


def test_bucket_admits_its_burst_then_the_rate_at_any_moment() -> None:
    limiter = RateLimiter(rpm=3000, tpm=None, burst_seconds=2, kind="bucket")  # 50/s, holds 100
    start = 1_200_000.3  # no window edge matters to a bucket
    burst = [limiter.check(1, now=start).allowed for _ in range(150)]
    assert sum(burst) == 100 and all(burst[:100])
    refused = limiter.check(1, now=start)
    assert not refused.allowed and refused.retry_after == pytest.approx(0.02)
    assert refused.requests == (3000, 0, pytest.approx(2.0))  # limit, remaining, until full
    # then 50 a second, however the sends fall: 10 s of sends every 5 ms admit 500 (+-1)
    admitted = sum(limiter.check(1, now=start + i * 0.005).allowed for i in range(1, 2001))
    assert 499 <= admitted <= 501
    # idle, it refills to the burst and no further; its headers read per minute
    later = limiter.check(1, now=start + 100)
    assert later.allowed and later.requests[1] == 3000 - 30 and later.requests[2] < 0.021


def test_bucket_limits_tokens_and_refuses_a_request_larger_than_it() -> None:
    limiter = RateLimiter(rpm=None, tpm=6000, burst_seconds=1, kind="bucket")  # 100 tokens/s
    assert limiter.check(60, now=5.0).allowed and not limiter.check(60, now=5.0).allowed
    refused = limiter.check(60, now=5.1)
    assert refused.kind == "tokens" and refused.retry_after == pytest.approx(0.1)
    assert limiter.check(60, now=5.2).allowed
    assert limiter.check(101, now=50.0).too_large
    with pytest.raises(ValueError, match="limiter must be one of window, bucket"):
        EmulatorConfig(limiter="leaky")


def test_limiter_windows_grow_to_hold_one_request() -> None:
    limiter = RateLimiter(rpm=30, tpm=None, burst_seconds=1)  # one request per two seconds
    assert [limiter.check(1, now=10.0 + t).allowed for t in (0, 1, 2)] == [True, False, True]
    with pytest.raises(ValueError, match="burst_seconds"):
        RateLimiter(rpm=30, tpm=None, burst_seconds=0)
