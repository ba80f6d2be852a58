"""A structured-output API's JSON-schema subset, described as data (`SchemaSubset`) and checked
before anything is uploaded: an API that sends the schema strictly rejects one outside its subset
for every request of a batch.

Each provider folder that has a subset describes it (``providers/openai/params.py``,
``providers/anthropic/params.py``); this module walks a schema against one.
"""

import dataclasses
from collections.abc import Iterator
from typing import Any

#: Keywords no strict structured-output API supports (a subset's ``unsupported`` adds its own).
STRICT_UNSUPPORTED = frozenset(
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
_CHILD_MAPS = ("properties", "$defs", "definitions")
_CHILD_LISTS = ("anyOf", "oneOf", "prefixItems")


@dataclasses.dataclass(frozen=True)
class SchemaSubset:
    """What a strict structured-output API takes of JSON schema: no keyword of ``unsupported``
    anywhere, ``"additionalProperties": false`` on every object, and where set: every property
    listed in ``required``, at most ``max_depth`` levels of nested objects and
    ``max_properties`` properties in all."""

    unsupported: frozenset[str] = STRICT_UNSUPPORTED
    every_property_required: bool = False
    max_depth: int | None = None
    max_properties: int | None = None

    def problem(self, schema: dict[str, Any]) -> str | None:
        """The first way ``schema`` leaves the subset, or None."""
        properties = 0
        for path, node, depth in _walk(schema, "#", 1):
            used = sorted(self.unsupported & node.keys())
            if used:
                return f"{path} uses {used}, which is not supported"
            if node.get("type") == "object" or "properties" in node:
                problem = self._object_problem(path, node)
                if problem:
                    return problem
                properties += len(node.get("properties") or {})
                if self.max_depth is not None and depth > self.max_depth:
                    return f"{path} is nested {depth} objects deep (at most {self.max_depth})"
        if self.max_properties is not None and properties > self.max_properties:
            return f"it has {properties} properties (at most {self.max_properties})"
        return None

    def _object_problem(self, path: str, node: dict[str, Any]) -> str | None:
        if node.get("additionalProperties") is not False:
            return (
                f'{path} must set "additionalProperties": false (for a pydantic model: '
                "model_config = ConfigDict(extra='forbid'))"
            )
        missing = sorted(set(node.get("properties") or {}) - set(node.get("required") or []))
        if self.every_property_required and missing:
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
