"""The response schema must be a valid JSON schema and fit the provider's structured-output subset.

OpenAI sends it with ``strict: true`` (structured outputs), Anthropic as ``output_config``;
both reject a schema outside their subset for every request of a batch, so it is checked here,
before anything is uploaded. The subsets (provider documentation, 2025-2026):

- the root is an object; every object sets ``additionalProperties: false``;
- OpenAI: every property is listed in ``required`` (optional fields are ``["T", "null"]``), at
  most 10 levels of nesting and 5,000 properties;
- neither supports ``allOf``, ``not``, ``if``/``then``/``else``, ``patternProperties``,
  ``dependent*``, ``unevaluated*``, ``propertyNames`` or ``contains``; Anthropic also rejects
  numeric and string-length constraints.
"""

from collections.abc import Iterator
from typing import Any

import jsonschema

from maple_engine.errors import ConfigError
from maple_engine.providers.base import Dialect
from maple_engine.providers.registry import known_capabilities

UNSUPPORTED = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "contains",
    }
)
ANTHROPIC_UNSUPPORTED = UNSUPPORTED | {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
}
OPENAI_MAX_DEPTH = 10
OPENAI_MAX_PROPERTIES = 5000
_CHILD_MAPS = ("properties", "$defs", "definitions")
_CHILD_LISTS = ("anyOf", "oneOf", "prefixItems")


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
            f"{where}: {problem}; the {_dialect(provider).label} structured-output API rejects "
            "it. Fix the schema before sending."
        )


def _dialect(provider: str) -> Dialect:
    known = known_capabilities(provider)
    return known.dialect if known is not None else Dialect.OPENAI


def subset_problem(schema: dict[str, Any], provider: str) -> str | None:
    """The first way ``schema`` leaves the provider's subset, or None."""
    if schema.get("type") != "object":
        return 'the root must be an object schema ({"type": "object", ...})'
    dialect = _dialect(provider)
    if dialect is Dialect.GEMINI:
        return None
    return _strict_problem(schema, dialect is Dialect.ANTHROPIC)


def _strict_problem(schema: dict[str, Any], anthropic: bool) -> str | None:
    """OpenAI's strict subset, or Anthropic's (Gemini's OpenAPI subset: only the root check)."""
    banned = ANTHROPIC_UNSUPPORTED if anthropic else UNSUPPORTED
    properties = 0
    for path, node, depth in _walk(schema, "#", 1):
        used = sorted(banned & node.keys())
        if used:
            return f"{path} uses {used}, which is not supported"
        if node.get("type") == "object" or "properties" in node:
            problem = _object_problem(path, node, strict_required=not anthropic)
            if problem:
                return problem
            properties += len(node.get("properties") or {})
            if not anthropic and depth > OPENAI_MAX_DEPTH:
                return f"{path} is nested {depth} objects deep (at most {OPENAI_MAX_DEPTH})"
    if not anthropic and properties > OPENAI_MAX_PROPERTIES:
        return f"it has {properties} properties (at most {OPENAI_MAX_PROPERTIES})"
    return None


def _object_problem(path: str, node: dict[str, Any], strict_required: bool) -> str | None:
    if node.get("additionalProperties") is not False:
        return (
            f'{path} must set "additionalProperties": false (for a pydantic model: '
            "model_config = ConfigDict(extra='forbid'))"
        )
    missing = sorted(set(node.get("properties") or {}) - set(node.get("required") or []))
    if strict_required and missing:
        return (
            f'{path} must list every property in "required" (missing {missing}); make an '
            'optional field nullable instead ({"type": ["string", "null"]})'
        )
    return None


def _walk(node: Any, path: str, depth: int) -> Iterator[tuple[str, dict[str, Any], int]]:
    """Every sub-schema with its JSON pointer and object depth."""
    if not isinstance(node, dict):
        return
    yield path, node, depth
    deeper = depth + 1 if node.get("type") == "object" or "properties" in node else depth
    for key in _CHILD_MAPS:
        for name, child in (node.get(key) or {}).items():
            yield from _walk(child, f"{path}/{key}/{name}", deeper if key == "properties" else 1)
    for key in _CHILD_LISTS:
        for i, child in enumerate(node.get(key) or []):
            yield from _walk(child, f"{path}/{key}/{i}", depth)
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}/items", depth)
