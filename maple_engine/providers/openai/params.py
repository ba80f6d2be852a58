"""What OpenAI's APIs refuse in a job's settings (every provider speaking OpenAI's API shares
them), checked before anything is uploaded:

- a parameter spelled for the other OpenAI API (``max_tokens`` on Responses, ``reasoning`` on
  chat completions, ...) is refused naming the spelling this API takes;
- a reasoning parameter (``reasoning_effort``, ``reasoning``) on a model that does not reason
  (the provider's ``reasoning_models``, when it lists them) is refused (the API answers it 400
  per row); Responses' ``reasoning`` is an object (``{"effort": "low"}``), and an effort is one of
  `EFFORTS`;
- a reasoning model takes no sampling parameter (`FIXED_ON_REASONING`: ``temperature`` and
  ``top_p`` only at their default 1, no penalties, ``logprobs`` or ``logit_bias``) unless it is
  told not to reason (effort ``none``): "Not Supported: temperature, top_p, presence_penalty,
  frequency_penalty, logprobs, top_logprobs, logit_bias, max_tokens"
  (learn.microsoft.com/azure/ai-foundry/openai/how-to/reasoning, the same models' API);
- the response schema fits the strict structured-output subset (sent with ``strict: true``):
  the root is an object, every object sets ``additionalProperties: false``, every property is
  listed in ``required`` (optional fields are ``["T", "null"]``), at most 10 levels of nesting
  and 5,000 properties, none of the keywords of ``STRICT_UNSUPPORTED`` (provider
  documentation, 2025-2026).
"""

from collections.abc import Mapping
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.rules import API_NAMES, ChatParams, RequestRules
from maple_engine.providers.schema_subset import SchemaSubset

#: parameters of one OpenAI API and how the other spells them (``None``: it has no such one)
SPELLINGS: dict[str, dict[str, str | None]] = {
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
#: the reasoning efforts OpenAI's models take (``none`` and ``xhigh`` on the newer ones)
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
#: parameters a reasoning model refuses, with the one value it takes (None: none at all)
FIXED_ON_REASONING: dict[str, object] = {
    "temperature": 1,
    "top_p": 1,
    "presence_penalty": None,
    "frequency_penalty": None,
    "logprobs": None,
    "top_logprobs": None,
    "logit_bias": None,
}
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
SCHEMA = SchemaSubset(
    every_property_required=True, max_depth=MAX_DEPTH, max_properties=MAX_PROPERTIES
)


def check_params(asked: ChatParams) -> None:
    """The parameters are spelled for the job's API, and reasoning ones go to a reasoning
    model."""
    for name, instead in SPELLINGS[asked.endpoint].items():
        if name in asked.params:
            fix = f"use {instead}" if instead else "drop it: the prompt template makes it"
            raise ConfigError(
                f"--param {name}: {API_NAMES[asked.endpoint]} (--endpoint {asked.endpoint}) "
                f"does not take it; {fix}."
            )
    reasoning = [p for p in ("reasoning_effort", "reasoning") if p in asked.params]
    models = asked.reasoning_models
    if reasoning and models and not asked.model.startswith(models):
        raise ConfigError(
            f"--param {reasoning[0]}: {asked.model} is not a reasoning model, and the API "
            f"refuses the parameter for it; drop it, or use a reasoning model "
            f"({', '.join(m + '...' for m in models)})."
        )
    effort = _effort(asked.params)
    if models and asked.model.startswith(models) and effort != "none":
        _check_sampling(asked)


def _effort(params: Mapping[str, Any]) -> str | None:
    """The effort asked for (``reasoning_effort``, or Responses' ``reasoning`` object), checked."""
    if "reasoning" in params:
        reasoning = params["reasoning"]
        if not isinstance(reasoning, dict):
            raise ConfigError(
                f"--param reasoning: the Responses API takes an object, not {reasoning!r}: "
                'e.g. --param \'reasoning={"effort": "low"}\'.'
            )
        effort = reasoning.get("effort")
        name = "reasoning.effort"
    else:
        effort, name = params.get("reasoning_effort"), "reasoning_effort"
    if effort is not None and effort not in EFFORTS:
        raise ConfigError(
            f"--param {name}: {effort!r} is not an effort OpenAI's models take; use one of "
            f"{', '.join(EFFORTS)}."
        )
    return effort if isinstance(effort, str) else None


def _check_sampling(asked: ChatParams) -> None:
    """A reasoning model (not told to skip reasoning) takes no sampling parameter."""
    for name, default in FIXED_ON_REASONING.items():
        if name in asked.params and asked.params[name] != default:
            only = f"only at {default}" if default is not None else "not at all"
            raise ConfigError(
                f"--param {name}: {asked.model} is a reasoning model, which takes it {only}; "
                "drop it (or, where the model takes it, set the effort to none)."
            )


RULES = RequestRules(
    label="OpenAI",
    check_params=check_params,
    schema=SCHEMA,
    reasoning_params=("reasoning_effort", "reasoning"),
)
