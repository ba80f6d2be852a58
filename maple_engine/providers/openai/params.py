"""What OpenAI's APIs refuse in a job's settings (every provider speaking OpenAI's API shares
them), checked before anything is uploaded:

- a parameter spelled for the other OpenAI API (``max_tokens`` on Responses, ``reasoning`` on
  chat completions, ...) is refused naming the spelling this API takes;
- a reasoning parameter (``reasoning_effort``, ``reasoning``) on a model that does not reason
  (the provider's ``reasoning_models``, when it lists them) is refused (the API answers it 400
  per row);
- the response schema fits the strict structured-output subset (sent with ``strict: true``):
  the root is an object, every object sets ``additionalProperties: false``, every property is
  listed in ``required`` (optional fields are ``["T", "null"]``), at most 10 levels of nesting
  and 5,000 properties, none of the keywords of ``STRICT_UNSUPPORTED`` (provider
  documentation, 2025-2026).
"""

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


RULES = RequestRules(
    label="OpenAI",
    check_params=check_params,
    schema=SCHEMA,
    reasoning_params=("reasoning_effort", "reasoning"),
)
