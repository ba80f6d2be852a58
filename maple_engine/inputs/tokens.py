"""Token estimates of a request, as polars expressions over the input columns (no I/O)."""

from typing import Any

import polars as pl

from maple_engine.inputs.templates import parse_template, render_expr, template_columns
from maple_engine.ledger.pricing import DEFAULT_OUTPUT_ESTIMATE, estimate_tokens
from maple_engine.model import CHAT, FILE_TOKENS, Kind
from maple_engine.providers.registry import known_capabilities
from maple_engine.spec import JobSpec

MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3
MAX_TOKEN_PARAMS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def output_tokens_per_request(params: dict[str, Any], kind: Kind = CHAT) -> int:
    """The request's max output tokens when a parameter sets it, else the default estimate
    (a kind with no reply, an embedding, has none)."""
    if not kind.replies:
        return 0
    for name in MAX_TOKEN_PARAMS:
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_ESTIMATE


def text_tokens_expr(text: pl.Expr) -> pl.Expr:
    """`estimate_tokens` as a polars expression: ``max(1, (chars + 3) // 4)``."""
    chars = text.str.len_chars().cast(pl.Int64)
    return pl.max_horizontal(pl.lit(1, pl.Int64), (chars + 3) // 4)


def system_tokens(system: str | None, provider: str) -> int:
    """Prompt tokens of the system message: some providers drop an empty system prompt
    (Anthropic's), others send it as a message of its own (OpenAI's)."""
    known = known_capabilities(provider)
    if system is None or (not system and known is not None and known.drops_empty_system):
        return 0
    return estimate_tokens(system) + MESSAGE_OVERHEAD


def token_columns(spec: JobSpec) -> list[str]:
    """The columns `prompt_tokens_expr` reads: the template's, and the tokens of a row's files
    (``FILE_TOKENS``, counted when its request was encoded: `maple_engine.inputs.files`)."""
    columns = template_columns(parse_template(spec.template))
    return [*columns, FILE_TOKENS] if spec.file_columns else columns


def prompt_tokens_expr(spec: JobSpec, provider: str) -> pl.Expr:
    """Estimated prompt tokens of each row's request, over the input columns (a kind with no
    reply, an embedding, sends its text alone: no messages), with its files' tokens."""
    if not spec.kind.replies:
        return text_tokens_expr(render_expr(parse_template(spec.template)))
    user = text_tokens_expr(render_expr(parse_template(spec.template))) + MESSAGE_OVERHEAD
    files = pl.col(FILE_TOKENS) if spec.file_columns else pl.lit(0, pl.Int64)
    return user + files + (REPLY_PRIMING + system_tokens(spec.system, provider))
