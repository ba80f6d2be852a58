"""Label rules: what a structured reply of one enum or boolean field says, so that a job's
labels follow a rule a classifier can learn (``--label-rule keywords``), not only today's first
enum value (``--label-rule first``).

``keywords``: the words of a prompt are its lower-cased runs of letters and digits (the last
user message's text; a system prompt is not read). An enum field's answer is the first enum
value (in the schema's order) whose words all appear among the prompt's words, else the first
value. A boolean field's answer is true when the words of the field's name (split on ``_``,
without a leading ``is``, ``has`` or ``about``) all appear among the prompt's words.

``--label-noise FRACTION`` flips that share of the answers, chosen by the prompt's text
(BLAKE2b-64 of the UTF-8 text, as a fraction of 2**64, below FRACTION: flipped), so the same
prompt is answered the same way every time: an enum answer becomes the next value (the last
wraps to the first), a boolean its negation."""

import hashlib
import re
from dataclasses import dataclass
from typing import Any

RULES = ("first", "keywords")
_WORD = re.compile(r"[a-z0-9]+")
_NAME_PREFIXES = ("is", "has", "about")


def words(text: str) -> list[str]:
    """The lower-cased runs of letters and digits of ``text``."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class LabelRule:
    """How a one-field enum or boolean reply is chosen (``first``: as for any schema)."""

    rule: str = "first"
    noise: float = 0.0

    def answer(self, schema: Any, text: str) -> dict[str, Any] | None:
        """The reply object for ``schema`` under the rule, or None where it does not apply
        (the ``first`` rule, or a schema other than an object of one enum or boolean field)."""
        if self.rule == "first":
            return None
        field = single_label_field(schema)
        if field is None:
            return None
        name, values = field
        found = set(words(text))
        if values is None:
            label: Any = _name_words(name) <= found
        else:
            label = next((v for v in values if set(words(str(v))) <= found), values[0])
        if self.noise and _share(text) < self.noise:
            label = (
                (not label) if values is None else values[(values.index(label) + 1) % len(values)]
            )
        return {name: label}


def single_label_field(schema: Any) -> tuple[str, list[Any] | None] | None:
    """``(name, enum values)`` of an object schema with one enum field, ``(name, None)`` with
    one boolean field, else None."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    ((name, field),) = properties.items()
    if not isinstance(field, dict):
        return None
    if isinstance(field.get("enum"), list) and field["enum"]:
        return name, list(field["enum"])
    if field.get("type") == "boolean":
        return name, None
    return None


def _name_words(name: str) -> set[str]:
    parts = [p for p in name.lower().split("_") if p]
    if len(parts) > 1 and parts[0] in _NAME_PREFIXES:
        parts = parts[1:]
    return set(parts)


def _share(text: str) -> float:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64
