"""Deterministic reply content: the echo text, schema-conforming JSON objects and embedding
vectors."""

import base64
import functools
import hashlib
from typing import Any

import numpy as np

from emulator.core.labels import LabelRule, words
from emulator.core.tokens import content_text

ECHO_PREFIX = "echo: "
_MAX_DEPTH = 8
_FORMAT_SAMPLES = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "echo@example.com",
    "uri": "https://example.com/echo",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def last_user_text(messages: Any) -> str:
    """Text of the last ``user`` message (text parts joined with a space)."""
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return content_text(message.get("content"))
    return ""


def echo_text(messages: Any) -> str:
    """The reply text: ``echo: `` followed by the last user message's text."""
    return ECHO_PREFIX + last_user_text(messages)


_IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})


def has_image(messages: Any) -> bool:
    """Whether any message carries an image part (OpenAI ``image_url`` or Anthropic ``image``)."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in _IMAGE_PART_TYPES for part in content
        ):
            return True
    return False


def instance_for_schema(schema: Any, text: str, label: LabelRule | None = None) -> Any:
    """A JSON value that validates against ``schema``, with strings filled by ``text``; an
    object of one enum or boolean field answered by ``label``'s rule where it has one."""
    labelled = label.answer(schema, text) if label is not None else None
    if labelled is not None:
        return labelled
    root = schema if isinstance(schema, dict) else {}
    return _instance(root, root, text, 0)


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        if not part or not isinstance(node, dict):
            continue
        node = node.get(part.replace("~1", "/").replace("~0", "~"), {})
    return node


def _instance(schema: Any, root: dict[str, Any], text: str, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return text
    if "$ref" in schema:
        return _instance(_resolve(schema["$ref"], root), root, text, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _instance((non_null or options)[0], root, text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    return _typed_instance(str(kind), schema, root, text, depth)


def _typed_instance(
    kind: str, schema: dict[str, Any], root: dict[str, Any], text: str, depth: int
) -> Any:
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _instance(sub, root, text, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        item = _instance(schema.get("items", {}), root, text, depth + 1)
        return [item] * count
    if kind in ("number", "integer"):
        return _number(schema)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(schema, text)


def _number(schema: dict[str, Any]) -> int:
    value = 1
    if "minimum" in schema:
        value = max(
            value,
            int(schema["minimum"]) + (0 if schema["minimum"] == int(schema["minimum"]) else 1),
        )
    if "exclusiveMinimum" in schema:
        value = max(value, int(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        value = min(value, int(schema["maximum"]))
    return value


def _string(schema: dict[str, Any], text: str) -> str:
    value = _FORMAT_SAMPLES.get(str(schema.get("format")), text)
    min_length = int(schema.get("minLength", 0))
    if len(value) < min_length:
        value = value + "." * (min_length - len(value))
    if "maxLength" in schema:
        value = value[: int(schema["maxLength"])]
    return value


def invalid_instance(schema: Any, text: str) -> Any:
    """A JSON value that does NOT validate against an object schema (the ``invalid_output`` fault).

    An object schema with required properties gets an object without them; any other schema gets
    a JSON array, which no object schema accepts.
    """
    if isinstance(schema, dict) and schema.get("required"):
        return {"unexpected": text}
    return [text]


def embedding_vector(text: str, dims: int, as_base64: bool = False) -> list[float] | str:
    """The emulator's embedding of ``text``: a documented, deterministic function of the text
    and the dimension, the same in real-time calls and in batches, and through every provider's
    embedding routes (OpenAI's, Gemini's, Bedrock Titan's). Texts that share words lie close, as
    a real model's do: the vector is the normalized sum of one vector per word.

    Words: the lower-cased runs of letters and digits of ``text`` (``emulator.core.labels``'s
    ``words``), each counted as often as it occurs; a text without any is the one word ``""``.
    A word's vector: BLAKE2b-512 of the word (UTF-8) followed by a 4-byte little-endian counter
    0, 1, 2, ... concatenated until there are ``2 * dims`` bytes; value i is the i-th 2-byte
    little-endian unsigned integer u, as ``u / 32767.5 - 1`` (in [-1, 1]). The text's vector:
    the sum of its words' vectors divided by its Euclidean norm (unit length), each value
    rounded to 6 decimals; ``base64`` is those values packed as little-endian float32.
    """
    total = np.zeros(dims)
    for word in words(text) or [""]:
        total += _word_vector(word, dims)
    values = np.round(total / (float(np.linalg.norm(total)) or 1.0), 6)
    if as_base64:
        return base64.b64encode(values.astype("<f4").tobytes()).decode()
    return [float(v) for v in values]


@functools.lru_cache(maxsize=65536)
def _word_vector(word: str, dims: int) -> "np.ndarray[Any, np.dtype[np.float64]]":
    data = word.encode()
    blocks = -(-dims * 2 // 64)  # BLAKE2b-512 gives 64 bytes a block
    raw = b"".join(hashlib.blake2b(data + i.to_bytes(4, "little")).digest() for i in range(blocks))
    vector: np.ndarray[Any, np.dtype[np.float64]] = (
        np.frombuffer(raw[: dims * 2], dtype="<u2") / 32767.5 - 1.0
    )
    vector.flags.writeable = False
    return vector
