"""The API a chat job sends to (``--endpoint``) and the model parameters that API and model
take, checked before anything is uploaded: a parameter the provider would refuse fails every
row at the provider, after the upload, and each refused row may be billed for its attempt.

- ``--endpoint responses`` needs a provider that serves OpenAI's Responses API;
- a parameter spelled for the other OpenAI API (``max_tokens`` on Responses, ``reasoning`` on
  chat completions, ...) is refused naming the spelling this API takes;
- a reasoning parameter (``reasoning_effort``, ``reasoning``) on a model that does not reason
  (``ProviderCapabilities.reasoning_models``: OpenAI's) is refused (the API answers it 400 per
  row);
- Anthropic's extended thinking (``thinking``) takes a ``budget_tokens`` of at least 1,024,
  below ``max_tokens``, and no ``temperature`` other than 1 nor ``top_k``.
"""

from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.base import Dialect, ProviderCapabilities
from maple_engine.providers.registry import capabilities, one_of
from maple_engine.spec import JobSpec

#: parameters of one OpenAI API and how the other spells them (``None``: it has no such one)
_SPELLINGS: dict[str, dict[str, str | None]] = {
    "responses": {
        "max_tokens": "max_output_tokens",
        "max_completion_tokens": "max_output_tokens",
        "reasoning_effort": 'reasoning={"effort": "..."}',
        "response_format": "--response-schema (sent as text.format)",
        "messages": None,
    },
    "chat": {
        "max_output_tokens": "max_completion_tokens",
        "reasoning": "reasoning_effort",
        "instructions": "--system",
        "input": None,
    },
}
_API_NAMES = {"chat": "chat completions", "responses": "the Responses API"}
THINKING_MIN_BUDGET = 1024


def check_api_params(spec: JobSpec) -> None:
    """The provider serves the job's API, and the parameters fit the API and the model."""
    if "endpoint" not in spec.kind.options:  # a kind with no reply (an embedding)
        return
    able = capabilities(spec.provider)
    if spec.endpoint not in able.endpoints:
        raise ConfigError(
            f"--endpoint {spec.endpoint}: provider {spec.provider!r} does not serve "
            f"{_API_NAMES[spec.endpoint]}; use --endpoint chat (the default), or "
            f"--provider {one_of(lambda c: spec.endpoint in c.endpoints)}."
        )
    if able.dialect == Dialect.OPENAI:
        _check_openai(spec, able)
    elif able.dialect == Dialect.ANTHROPIC:
        _check_thinking(spec.params)


def _check_openai(spec: JobSpec, able: ProviderCapabilities) -> None:
    for name, instead in _SPELLINGS[spec.endpoint].items():
        if name in spec.params:
            fix = f"use {instead}" if instead else "drop it: the prompt template makes it"
            raise ConfigError(
                f"--param {name}: {_API_NAMES[spec.endpoint]} (--endpoint {spec.endpoint}) "
                f"does not take it; {fix}."
            )
    reasoning = [p for p in ("reasoning_effort", "reasoning") if p in spec.params]
    models = able.reasoning_models
    if reasoning and models and not spec.model.startswith(models):
        raise ConfigError(
            f"--param {reasoning[0]}: {spec.model} is not a reasoning model, and the API "
            f"refuses the parameter for it; drop it, or use a reasoning model "
            f"({', '.join(m + '...' for m in models)})."
        )


def _check_thinking(params: dict[str, Any]) -> None:
    thinking = params.get("thinking")
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in {"enabled", "disabled"}:
        raise ConfigError(
            "--param thinking: give an object, e.g. "
            '--param \'thinking={"type": "enabled", "budget_tokens": 2048}\'.'
        )
    if thinking["type"] == "disabled":
        return
    budget = thinking.get("budget_tokens")
    limit = params.get("max_tokens")
    if not isinstance(budget, int) or budget < THINKING_MIN_BUDGET:
        raise ConfigError(
            f"--param thinking: budget_tokens must be a whole number of at least "
            f"{THINKING_MIN_BUDGET:,} (got {budget!r})."
        )
    if isinstance(limit, int) and budget >= limit:
        raise ConfigError(
            f"--param thinking: budget_tokens {budget:,} must be below max_tokens {limit:,} "
            "(the thinking and the answer share it): raise --param max_tokens."
        )
    if params.get("temperature", 1) != 1 or "top_k" in params:
        raise ConfigError(
            "--param thinking: extended thinking takes no temperature other than 1 and no "
            "top_k; drop them."
        )
