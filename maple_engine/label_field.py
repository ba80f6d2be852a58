"""The one field a distilled job (`--distill`) answers: an enum or a boolean, read from its
response schema."""

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class LabelField:
    """The response schema's only field: its name and its enum values (None: a boolean)."""

    name: str
    values: tuple[Any, ...] | None

    def reply(self, label: Any) -> dict[str, Any]:
        """The parsed reply that says ``label``."""
        return {self.name: label}


def label_field(schema: dict[str, Any] | None) -> LabelField:
    """The label field of ``schema``; a schema that asks for anything else is a ValueError
    naming what it asks for and the fix."""
    fix = (
        "--distill needs a --response-schema of one enum or boolean field, e.g. "
        '{"type": "object", "properties": {"aisle": {"type": "string", "enum": ["dairy", '
        '"produce"]}}, "required": ["aisle"], "additionalProperties": false}'
    )
    if schema is None:
        raise ValueError(f"{fix}; the job has no response schema")
    properties = schema.get("properties") if schema.get("type") == "object" else None
    if not isinstance(properties, dict) or len(properties) != 1:
        count = len(properties) if isinstance(properties, dict) else 0
        raise ValueError(f"{fix}; the schema has {count} fields")
    ((name, field),) = properties.items()
    if isinstance(field, dict) and isinstance(field.get("enum"), list) and len(field["enum"]) > 1:
        return LabelField(name, tuple(field["enum"]))
    if isinstance(field, dict) and field.get("type") == "boolean":
        return LabelField(name, None)
    raise ValueError(
        f"{fix}; its field {name!r} is neither an enum of 2 or more values nor a boolean"
    )
