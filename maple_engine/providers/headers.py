"""Extra HTTP headers a job sends on every request to its provider: what an AI gateway in front
of the provider requires (``x-portkey-provider``, a gateway's own key).

Given as ``NAME: VALUE`` (``--header``, repeatable) or a mapping (``headers=``), checked before
any I/O. Values may be secrets: no message here repeats one, and a job's persisted spec leaves
them out (``JobSpec.headers`` is excluded from its dump), so a rerun takes them from its caller
again. A value written ``@env:VAR`` is the variable ``VAR``'s value, so a secret need not sit in
the command line (where the process list shows it for the whole job).

A value is printable ASCII and tabs (HTTP sends header values as bytes; a non-ASCII one cannot
be sent as written). The headers Maple writes itself (`OWN_HEADERS`: the body's type and
length, the host) cannot be given: a gateway would read a body that is not what it says.
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.settings import named_variable

# RFC 9110's token: the characters a field name may hold.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value holds no control characters but tab (no line breaks: no header injection).
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
EXAMPLE = "--header 'x-portkey-provider: openai'"
FROM_ENV = "@env:"  # a value read from the environment: ``@env:PORTKEY_API_KEY``
#: Headers every call's own body sets: given, they would misdescribe it.
OWN_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding"})


def parse_headers(given: Any) -> dict[str, str]:
    """Headers as given: None, a mapping of name to value, or ``NAME: VALUE`` strings; every
    name a valid HTTP token and every value one line (`ConfigError` naming the header by its
    name or place, never its value)."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        pairs = [(str(name), value) for name, value in given.items()]
    elif isinstance(given, (list, tuple)):
        pairs = [_split(spec, number) for number, spec in enumerate(given, 1)]
    else:
        raise ConfigError(
            f"headers must map names to values (or be NAME: VALUE strings), not a "
            f"{type(given).__name__}: e.g. {EXAMPLE}."
        )
    return _checked(pairs)


def _split(spec: Any, number: int) -> tuple[str, Any]:
    """One ``NAME: VALUE`` string (the ``number``-th given) as its name and value."""
    name, colon, value = str(spec).partition(":")
    if not colon:
        raise ConfigError(
            f"--header #{number} has no colon (its text is not shown: it may hold a secret): "
            f"write NAME: VALUE, e.g. {EXAMPLE}."
        )
    return name.strip(), value.strip()


def _checked(pairs: Iterable[tuple[str, Any]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, given in pairs:
        if not name:
            raise ConfigError(f"A header has an empty name: write NAME: VALUE, e.g. {EXAMPLE}.")
        if not _TOKEN.fullmatch(name):
            raise ConfigError(
                f"Header name {name!r} is not a valid HTTP header name (letters, digits and "
                f"!#$%&'*+-.^_`|~ only, no spaces): e.g. {EXAMPLE}."
            )
        if not isinstance(given, str):
            raise ConfigError(f"Header {name}: its value must be a string.")
        if name.lower() in OWN_HEADERS:
            raise ConfigError(
                f"Header {name} is set by Maple on each call from the body it sends; leave it "
                "out (a gateway's own settings go in headers of their own names)."
            )
        value = _resolved(name, given)
        if not value.isascii():
            raise ConfigError(
                f"Header {name}: its value holds a character outside ASCII, which HTTP cannot "
                "send as written; encode it as the gateway documents (e.g. percent-encoded)."
            )
        if _BAD_VALUE.search(value):
            raise ConfigError(
                f"Header {name}: its value holds a line break or control character; give it "
                "on one line."
            )
        if name.lower() in (known.lower() for known in headers):
            raise ConfigError(f"Header {name} is given twice: give each header once.")
        headers[name] = value
    return headers


def _resolved(name: str, value: str) -> str:
    """``value``, or the variable's value where it is ``@env:VAR``."""
    if not value.startswith(FROM_ENV):
        return value
    variable = value.removeprefix(FROM_ENV).strip()
    found = named_variable(variable) if variable else None
    if found is None:
        raise ConfigError(
            f"Header {name}: its value reads ${variable or '?'} ({value}), which is not set: "
            "export it, then rerun."
        )
    return found


def redacted(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with every value hidden: what may be shown of them."""
    return dict.fromkeys(headers, "***")
