"""Prompt templates: ``{column}`` placeholders, ``{{`` / ``}}`` escapes, rendered by polars.

``{column:json}`` renders a list or struct column (or any column) as JSON text; a plain
``{column}`` must name a scalar column.
"""

import dataclasses
import re

import orjson
import polars as pl

from maple_engine.errors import ConfigError

JSON_SUFFIX = ":json"


@dataclasses.dataclass(frozen=True)
class Placeholder:
    column: str
    as_json: bool = False


Part = str | Placeholder


def parse_template(template: str) -> list[Part]:
    """Split a template into literal text and placeholders; a malformed one is a ConfigError."""
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char in "{}" and template[i : i + 2] in ("{{", "}}"):
            literal.append(char)
            i += 2
            continue
        if char == "}":
            raise ConfigError(
                _malformed(template, i, "a lone '}' (write '}}' for a literal brace)")
            )
        if char == "{":
            end = template.find("}", i + 1)
            inner = template[i + 1 : end] if end != -1 else ""
            if end == -1 or "{" in inner:
                raise ConfigError(_malformed(template, i, "a '{' without its closing '}'"))
            if not inner.strip():
                raise ConfigError(_malformed(template, i, "an empty placeholder '{}'"))
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(_placeholder(inner))
            i = end + 1
            continue
        literal.append(char)
        i += 1
    if literal:
        parts.append("".join(literal))
    return parts


#: What a column name usually looks like; anything else in braces is likely literal text.
_NAME_LIKE = re.compile(r"[\w .-]+")


def _placeholder(inner: str) -> Placeholder:
    if inner.endswith(JSON_SUFFIX) and inner[: -len(JSON_SUFFIX)].strip():
        return Placeholder(inner[: -len(JSON_SUFFIX)], as_json=True)
    return Placeholder(inner)


def _malformed(template: str, position: int, what: str) -> str:
    snippet = template[max(0, position - 20) : position + 20]
    return (
        f"The prompt template is malformed: {what} at character {position + 1} "
        f"(near {snippet!r}). Use {{column}} for a column and {{{{ }}}} for literal braces."
    )


def template_columns(parts: list[Part]) -> list[str]:
    return list(dict.fromkeys(p.column for p in parts if isinstance(p, Placeholder)))


def check_columns(parts: list[Part], columns: list[str], what: str = "prompt template") -> None:
    missing = [c for c in template_columns(parts) if c not in columns]
    if missing:
        literal = next((c for c in missing if not _NAME_LIKE.fullmatch(c)), None)
        hint = (
            f" If {{{literal}}} is meant as literal text (a JSON example), double its braces: "
            f"{{{{{literal}}}}}."
            if literal is not None
            else ""
        )
        raise ConfigError(
            f"The {what} names column(s) {missing} that the input does not have. "
            f"Available columns: {columns}.{hint}"
        )


def render_expr(parts: list[Part]) -> pl.Expr:
    """A polars expression rendering the template per row; nulls render as empty strings."""
    if not parts:
        return pl.lit("")
    exprs = [pl.lit(p) if isinstance(p, str) else _value(p) for p in parts]
    return pl.concat_str(exprs)


def _value(part: Placeholder) -> pl.Expr:
    if not part.as_json:
        return pl.col(part.column).cast(pl.String).fill_null("")
    # polars has no JSON encoder for lists: encode {"column": value} and cut the key off.
    key = orjson.dumps(part.column).decode()
    wrapped = pl.struct(pl.col(part.column).alias(part.column)).struct.json_encode()
    return wrapped.str.slice(len(key) + 2).str.head(-1).fill_null("null")
