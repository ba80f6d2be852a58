"""The response schema must be a valid JSON schema and fit the provider's structured-output subset.

Every provider takes only an object schema at the root; a provider whose API sends the schema
strictly (OpenAI's ``strict: true``, Anthropic's ``output_config``) rejects one outside its
subset for every request of a batch, so it is checked here, before anything is uploaded. Each
provider describes its subset (``ProviderCapabilities.rules.schema``, in the provider's
``params.py``); a name no provider is registered under is held to the default provider's.
"""

from typing import Any

import jsonschema

from maple_engine.errors import ConfigError
from maple_engine.providers.registry import DEFAULT_PROVIDER, capabilities, known_capabilities
from maple_engine.providers.rules import RequestRules


def check_response_schema(schema: dict[str, Any] | None, provider: str, where: str) -> None:
    """``where`` names the option or argument in the error (e.g. ``--response-schema s.json``)."""
    if schema is None:
        return
    try:
        validator = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path) or "the root"
        raise ConfigError(
            f"{where}: not a valid JSON schema at {at}: {exc.message}. Fix the schema "
            "(https://json-schema.org/understanding-json-schema)."
        ) from exc
    problem = subset_problem(schema, provider)
    if problem:
        raise ConfigError(
            f"{where}: {problem}; the {_rules(provider).label} structured-output API rejects "
            "it. Fix the schema before sending."
        )


def _rules(provider: str) -> RequestRules:
    known = known_capabilities(provider) or capabilities(DEFAULT_PROVIDER)
    return known.rules


def subset_problem(schema: dict[str, Any], provider: str) -> str | None:
    """The first way ``schema`` leaves the provider's subset, or None."""
    if schema.get("type") != "object":
        return 'the root must be an object schema ({"type": "object", ...})'
    subset = _rules(provider).schema
    return subset.problem(schema) if subset is not None else None
