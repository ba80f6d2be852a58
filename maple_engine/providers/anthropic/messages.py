"""The Anthropic Messages wire format, shared by the batch and the real-time providers.

- ``message_body_expr``: a Messages API body per row, built with polars expressions.
- ``parse_message``: a ``message`` object -> a result row (refusals are ``refused``).
- ``classify_error``: an Anthropic error type (+ HTTP status) -> the failure taxonomy.

Usage: Anthropic's ``input_tokens`` excludes cache reads and writes, so the row's
``input_tokens`` (all input, as in ``RESULT_SCHEMA``) is input + cache read + cache creation.
"""

from typing import Any

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass, classify_http
from maple_engine.providers.base import (
    PromptCaching,
    RequestSpec,
    failed_row,
    splice_params,
    user_content_expr,
)

__all__ = ["failed_row"]  # re-exported: the real-time engine imports it from here

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The ``anthropic-version`` Maple sends by default (the one its tests run against), and the
#: versions it can send (``ANTHROPIC_VERSION``); 2026-10-21 removed the sampling parameters.
ANTHROPIC_VERSION = "2023-06-01"
API_VERSIONS = ("2023-06-01", "2026-10-21")
REMOVED_IN = {"2026-10-21": ("temperature", "top_p", "top_k")}
#: Anthropic requires ``max_tokens``. 1024 fits the short extractions Maple is used for (a few
#: fields, a sentence or two) with room to spare; pass ``max_tokens`` in params to change it.
DEFAULT_MAX_TOKENS = 1024
IMAGE_PART = '{"type":"image","source":{"type":"url","url":{url}}}'

_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


#: The shortest prefix each Claude model caches (Anthropic's prompt-caching docs); others 1,024.
CLAUDE_CACHE_MINIMUMS = (
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("sonnet-4-6", 2048),
    ("haiku", 2048),  # Claude Haiku 3 and 3.5
)
ONE_HOUR = 3600


def claude_caching(ttl_s: int = 300) -> PromptCaching:
    """Claude's prompt caching with ``cache_control`` breakpoints of ``ttl_s`` (300 or 3600).

    A 1-hour write costs 2x the input price (the price source's cache-write rate is the
    5-minute one, 1.25x); reads cost 10% of it, and in batches the 50% discount stacks."""
    return PromptCaching(
        hint="cache-control",
        default_minimum=1024,
        minimum_tokens=CLAUDE_CACHE_MINIMUMS,
        write_multiple=2.0 if ttl_s == ONE_HOUR else None,
        ttl_s=ttl_s,
    )


def cached_system(system: str, ttl_s: int) -> list[dict[str, Any]]:
    """The system prompt as one text block marked as the end of the cached prefix."""
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl_s == ONE_HOUR:
        control["ttl"] = "1h"
    return [{"type": "text", "text": system, "cache_control": control}]


def anthropic_headers(api_key: str | None, version: str = ANTHROPIC_VERSION) -> dict[str, str]:
    """Auth and version headers for ``api_key``; a clear error without one."""
    if not api_key:
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set: export it (or pass api_key to the provider resource)."
        )
    return {"x-api-key": api_key, "anthropic-version": version}


def checked_version(version: str) -> str:
    """``version`` if Maple can send it (``ANTHROPIC_VERSION``), else a one-line error."""
    if version not in API_VERSIONS:
        raise ConfigError(
            f"ANTHROPIC_VERSION={version!r} is not an API version Maple can send: use one of "
            f"{', '.join(API_VERSIONS)} (default {ANTHROPIC_VERSION})."
        )
    return version


def check_version_params(version: str, params: dict[str, Any]) -> None:
    """A model parameter the API ``version`` removed fails every row at the provider: refuse
    it before anything is uploaded."""
    removed = [name for name in REMOVED_IN.get(version, ()) if name in params]
    if removed:
        raise ConfigError(
            f"--param {removed[0]}: Anthropic's API version {version} (ANTHROPIC_VERSION) no "
            f"longer takes {', '.join(removed)}; drop it, or set ANTHROPIC_VERSION=2023-06-01."
        )


def anthropic_base_url(base_url: str | None) -> str:
    return (base_url or DEFAULT_BASE_URL).rstrip("/")


def message_body_expr(
    spec: RequestSpec,
    user: pl.Expr,
    image: pl.Expr | None,
    lead: dict[str, Any] | None = None,
    cache_ttl_s: int | None = None,
    *,
    files: pl.Expr | None = None,
) -> pl.Expr:
    """``{"messages":[...],"model","max_tokens","system"?,"output_config"?, params...}``;
    ``files``: the row's encoded file blocks (`file_parts`).

    ``lead`` replaces ``model`` with other leading members (Bedrock's ``anthropic_version``).
    With ``spec.cache`` and a ``cache_ttl_s``, the system prompt (the shared prefix: it comes
    before the row's message) carries ``cache_control`` with that TTL."""
    head: dict[str, Any] = {
        **({"model": spec.model} if lead is None else lead),
        "max_tokens": DEFAULT_MAX_TOKENS,
        **spec.params,
    }
    if spec.system is not None:
        cached = spec.cache and cache_ttl_s is not None and spec.system.strip()
        head["system"] = cached_system(spec.system, cache_ttl_s or 0) if cached else spec.system
    if spec.response_schema is not None:
        head["output_config"] = {"format": {"type": "json_schema", "schema": spec.response_schema}}
    content = user_content_expr(user, image, IMAGE_PART, files=files)
    body = pl.concat_str([pl.lit('{"messages":[{"role":"user","content":'), content, pl.lit("}]}")])
    return splice_params(body, head)


def classify_error(error_type: str | None, message: str = "", status: int | None = None) -> str:
    """Failure class of an Anthropic error (``errored`` batch result or HTTP error)."""
    code = status or _STATUS_OF_TYPE.get(error_type or "", 400)
    if error_type == "invalid_request_error" and "image" in message.lower():
        return FailureClass.INVALID_IMAGE.value
    if error_type in {"overloaded_error", "api_error", "timeout_error"}:
        return FailureClass.SERVER_ERROR.value
    return classify_http(code, None, error_type).value


def usage_columns(usage: dict[str, Any]) -> dict[str, int]:
    fresh = int(usage.get("input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return {
        "input_tokens": fresh + read + write,
        "cached_input_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": int(usage.get("output_tokens") or 0),
    }


def parse_message(custom_id: Any, message: dict[str, Any]) -> dict[str, Any]:
    """A Messages API ``message`` -> a result row; ``stop_reason: refusal`` is ``refused``."""
    row: dict[str, Any] = {
        "custom_id": custom_id,
        "billed": True,
        **usage_columns(message.get("usage") or {}),
    }
    if message.get("stop_reason") == "refusal":
        details = message.get("stop_details") or {}
        reason = details.get("explanation") or "the model refused (stop_reason: refusal)"
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=str(reason))
        return row
    blocks = message.get("content") or []
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    row.update(status="succeeded", response=text)
    return row


def parse_result_line(line: dict[str, Any]) -> dict[str, Any]:
    """One results-JSONL line (``{"custom_id", "result": {"type": ...}}``) -> a result row."""
    custom_id = line.get("custom_id")
    result = line.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        return parse_message(custom_id, result.get("message") or {})
    if kind == "errored":
        envelope: dict[str, Any] = result.get("error") or {}
        inner = envelope.get("error")
        detail: dict[str, Any] = inner if isinstance(inner, dict) else envelope
        error_type = detail.get("type")
        message = str(detail.get("message") or error_type or "errored")
        return failed_row(custom_id, classify_error(error_type, message), message)
    what = "canceled" if kind == "canceled" else "expired"
    return failed_row(
        custom_id, FailureClass.EXPIRED.value, f"the batch {what} the request before it ran"
    )
