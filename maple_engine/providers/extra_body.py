"""Extra fields a job adds to its batch provider's control calls: what an OpenAI-compatible
gateway in front of the provider wants in them (LiteLLM's ``custom_llm_provider``).

Given as ``KEY=JSON`` (``--extra-body``, repeatable) or a mapping (``extra_body=``), checked
before any I/O. A field goes into the JSON body of the batch create and, as a form field, into
the file upload (a JSON string as its text, any other value as its JSON). Values may be
secrets: no message here repeats one, and a job's persisted spec leaves them out
(``JobSpec.extra_body`` is excluded from its dump), so a rerun takes them from its caller again.
"""

import re
from collections.abc import Mapping
from typing import Any

import orjson

from maple_engine.errors import ConfigError

EXAMPLE = """--extra-body 'custom_llm_provider="azure"'"""
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def parse_extra_body(given: Any) -> dict[str, Any]:
    """Fields as given: None, a mapping of key to JSON value, or ``KEY=JSON`` strings; every
    key a plain name given once (`ConfigError` naming the field by its key or place, never
    its value)."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        pairs = [(str(key), value) for key, value in given.items()]
    elif isinstance(given, (list, tuple)):
        pairs = [_split(spec, number) for number, spec in enumerate(given, 1)]
    else:
        raise ConfigError(
            f"extra_body must map keys to JSON values (or be KEY=JSON strings), not a "
            f"{type(given).__name__}: e.g. {EXAMPLE}."
        )
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if not _KEY.fullmatch(key):
            raise ConfigError(
                f"--extra-body key {key!r} is not a field name (letters, digits, _ . -): "
                f"e.g. {EXAMPLE}."
            )
        if key in fields:
            raise ConfigError(f"--extra-body {key} is given twice: give each field once.")
        fields[key] = value
    return fields


def _split(spec: Any, number: int) -> tuple[str, Any]:
    """One ``KEY=JSON`` string (the ``number``-th given) as its key and parsed value."""
    key, equals, text = str(spec).partition("=")
    if not equals:
        raise ConfigError(
            f"--extra-body #{number} has no '=' (its text is not shown: it may hold a secret): "
            f"write KEY=JSON, e.g. {EXAMPLE}."
        )
    key = key.strip()
    try:
        return key, orjson.loads(text)
    except orjson.JSONDecodeError:
        raise ConfigError(
            f"--extra-body {key or '#' + str(number)}: the value after '=' is not JSON (not "
            f"shown: it may hold a secret); quote a string, e.g. {EXAMPLE}."
        ) from None


def form_fields(fields: Mapping[str, Any]) -> dict[str, str]:
    """``fields`` as multipart form fields: a string as its text, any other value as JSON."""
    return {
        key: value if isinstance(value, str) else orjson.dumps(value).decode()
        for key, value in fields.items()
    }
