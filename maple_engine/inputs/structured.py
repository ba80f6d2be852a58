"""Structured output: the polars type of ``llm_parsed`` from the response's JSON schema."""

from typing import Any

import polars as pl

_SCALARS: dict[str, pl.DataType] = {
    "string": pl.String(),
    "integer": pl.Int64(),
    "number": pl.Float64(),
    "boolean": pl.Boolean(),
}


def schema_dtype(schema: dict[str, Any]) -> pl.DataType:
    """Objects become structs, arrays lists, scalars their type; anything else stays JSON text."""
    kind = schema.get("type")
    if isinstance(kind, list):  # e.g. ["string", "null"]
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object" and isinstance(schema.get("properties"), dict):
        fields = {name: schema_dtype(sub) for name, sub in schema["properties"].items()}
        return pl.Struct(fields) if fields else pl.String()
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pl.List(schema_dtype(schema["items"]))
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return pl.String()
    return pl.String()
