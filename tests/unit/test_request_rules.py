"""Each provider's rules on a job's settings (``providers/<name>/params.py``): the parameters its
API refuses and the JSON-schema subset of its structured outputs, read through its capabilities
(``ProviderCapabilities.rules``) by the pre-flight."""

from types import SimpleNamespace
from typing import Any, cast

import pytest

from maple_assets.cli.dry_run import _reasoning_note
from maple_engine.errors import ConfigError
from maple_engine.inputs.api_params import check_api_params
from maple_engine.inputs.schema_checks import subset_problem
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.providers.anthropic import params as anthropic
from maple_engine.providers.gemini import params as gemini
from maple_engine.providers.openai import params as openai
from maple_engine.providers.registry import PROVIDERS, capabilities
from maple_engine.providers.rules import NO_RULES, ChatParams
from maple_engine.spec import JobSpec


def asked(model: str = "m", endpoint: str = "chat", **params: Any) -> ChatParams:
    return ChatParams(model, endpoint, params, reasoning_models=openai_reasoning())


ROOM = {"max_tokens": 4096}  # above a 2,048 thinking budget


def openai_reasoning() -> tuple[str, ...]:
    return capabilities("openai").reasoning_models


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_provider_describes_its_rules_and_its_twin_shares_them(name: str) -> None:
    caps = capabilities(name)
    assert caps.rules is not NO_RULES
    if caps.realtime_twin is not None:
        assert capabilities(caps.realtime_twin).rules == caps.rules


@pytest.mark.parametrize(
    ("ask", "says"),
    [
        (asked(endpoint="responses", max_tokens=5), "use max_output_tokens"),
        (asked(endpoint="responses", messages=[]), "drop it: the prompt template makes it"),
        (asked(max_output_tokens=5), "use max_completion_tokens"),
        (asked("gpt-4o-mini", reasoning_effort="low"), "gpt-4o-mini is not a reasoning model"),
        (asked("o4-mini", reasoning_effort="extreme"), "'extreme' is not an effort"),
        (asked("gpt-5", "responses", reasoning={"effort": "max"}), "'max' is not an effort"),
        (asked("gpt-5", "responses", reasoning="high"), "takes an object, not 'high'"),
        (asked("o3", temperature=0.2), "o3 is a reasoning model, which takes it only at 1"),
        (asked("gpt-5-mini", top_p=0.5, reasoning_effort="low"), "takes it only at 1"),
        (asked("gpt-5", "responses", logprobs=True), "which takes it not at all"),
    ],
)
def test_openai_refuses_a_parameter_of_the_other_api_or_model(ask: ChatParams, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        openai.check_params(ask)


def test_openai_takes_reasoning_on_a_reasoning_model_and_anything_where_none_are_listed() -> None:
    openai.check_params(asked("o4-mini", reasoning_effort="low"))
    openai.check_params(asked("o4-mini", temperature=1, top_p=1))  # the defaults, said aloud
    openai.check_params(asked("gpt-5.2", reasoning_effort="none", temperature=0.2))
    openai.check_params(asked("gpt-4o-mini", temperature=0.2, logprobs=True))
    openai.check_params(ChatParams("any-model", "chat", {"reasoning_effort": "low"}))


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"thinking": "on"}, "give an object"),
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "at least 1,024"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}},  # the default max_tokens
            "must be below max_tokens 1,024 \\(Maple's default\\).*--param max_tokens=4096",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 2048},
            "must be below max_tokens 2,048",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}, "temperature": 0.2, **ROOM},
            "no temperature other than 1",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_p": 0.5, **ROOM},
            "top_p from 0.95 to 1",
        ),
        (
            {
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "tool_choice": {"type": "tool", "name": "extract"},
                **ROOM,
            },
            "no tool_choice that forces a tool",
        ),
    ],
)
def test_anthropic_thinking_needs_a_budget_it_takes(params: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        anthropic.check_thinking(asked(**params))


@pytest.mark.parametrize(
    "model", ["claude-3-5-haiku-latest", "claude-3-haiku-20240307", "anthropic.claude-3-haiku-v1:0"]
)
def test_anthropic_thinking_on_a_model_without_it_is_refused(model: str) -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(ConfigError, match=f"{model} has no extended thinking"):
        anthropic.check_thinking(asked(model, thinking=thinking, **ROOM))
    anthropic.check_thinking(asked("claude-3-7-sonnet-latest", thinking=thinking, **ROOM))


def test_anthropic_thinking_passes_when_off_or_within_its_budget() -> None:
    anthropic.check_thinking(asked(thinking={"type": "disabled"}, temperature=0.2))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    anthropic.check_thinking(asked(thinking=thinking, max_tokens=4096, temperature=1))
    anthropic.check_thinking(
        asked(thinking=thinking, top_p=0.95, tool_choice={"type": "auto"}, **ROOM)
    )


@pytest.mark.parametrize(
    ("model", "thinking", "says"),
    [
        ("gemini-2.5-pro", {"thinkingBudget": 0}, "128 to 32,768"),
        ("gemini-2.5-flash-lite", {"thinkingBudget": 100}, "512 to 24,576"),
        ("gemini-2.5-flash", {"thinkingLevel": "low"}, "use thinkingBudget"),
        ("gemini-3-pro", {"thinkingLevel": "max"}, "use one of minimal, low, medium, high"),
        ("gemini-3-flash", {"thinkingLevel": "low", "thinkingBudget": 64}, "not both"),
    ],
)
def test_gemini_thinking_the_model_refuses(model: str, thinking: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        gemini.check_params(asked(model, thinking_config=thinking))


def test_gemini_thinking_the_model_takes() -> None:
    gemini.check_params(asked("gemini-2.5-flash", thinking_config={"thinkingBudget": 0}))
    gemini.check_params(asked("gemini-2.5-pro", thinkingConfig={"thinking_budget": -1}))
    gemini.check_params(asked("gemini-3-pro", thinking_config={"thinkingLevel": "HIGH"}))


def test_the_preflight_asks_the_provider_s_rules() -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 500}}
    spec = JobSpec(name="j", prompt="{t}", model="claude-sonnet-4-5", params=thinking)
    for provider in ("anthropic", "anthropic-realtime", "bedrock"):
        with pytest.raises(ConfigError, match="at least 1,024"):
            check_api_params(spec.model_copy(update={"provider": provider}))
    check_api_params(spec.model_copy(update={"provider": "gemini"}))


def nested(depth: int) -> dict[str, Any]:
    """An object schema ``depth`` objects deep, strict at every level."""
    schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    for _ in range(depth - 1):
        schema = {
            "type": "object",
            "properties": {"a": schema},
            "required": ["a"],
            "additionalProperties": False,
        }
    return schema


def test_openai_caps_nesting_and_properties_where_anthropic_and_gemini_do_not() -> None:
    assert subset_problem(nested(10), "openai") is None
    assert "nested 11 objects deep (at most 10)" in str(subset_problem(nested(11), "openai"))
    assert subset_problem(nested(11), "anthropic") is None
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(5001)},
        "required": [f"p{i}" for i in range(5001)],
        "additionalProperties": False,
    }
    assert subset_problem(wide, "openai") == "it has 5001 properties (at most 5000)"
    assert subset_problem(wide, "anthropic") is None
    assert subset_problem({"type": "object", "allOf": [{}]}, "gemini") is None
    assert subset_problem({"type": "array"}, "gemini") is not None


def test_a_name_no_provider_is_registered_under_is_held_to_the_default_subset() -> None:
    loose = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert "missing ['a']" in str(subset_problem(loose, "no-such-provider"))


@pytest.mark.parametrize(
    ("provider", "param"),
    [("gemini", "thinking_config"), ("anthropic", "thinking"), ("openai", "reasoning_effort")],
)
def test_the_estimate_notes_reasoning_asked_in_the_provider_s_own_parameter(
    provider: str, param: str
) -> None:
    spec = JobSpec(name="j", prompt="{t}", model="m", provider=provider, params={param: {}})
    built = SimpleNamespace(capabilities=capabilities(provider))
    note = _reasoning_note(spec, built, [], 10, cast(ModelPrice, None))
    assert note is not None and "cannot be foreseen" in note[1]
    assert (
        _reasoning_note(
            spec.model_copy(update={"params": {}}), built, [], 10, cast(ModelPrice, None)
        )
        is None
    )
