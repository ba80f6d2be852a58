"""The OpenAI wire format shared by the batch and real-time providers: base URL, credentials,
the chat-completions request body (as a polars expression) and the parsed completion."""

from typing import Any

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass
from maple_engine.providers.base import (
    PromptCaching,
    RequestSpec,
    json_literal,
    splice_params,
    user_content_expr,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: OpenAI caches any prompt prefix of 1,024+ tokens on its own, in 128-token steps (reads at the
#: model's cached-input price, writes free); ``prompt_cache_key`` steers requests sharing a prefix
#: to the same cache.
CACHING = PromptCaching(hint="cache-key", default_minimum=1024, step_tokens=128, ttl_s=300)
IMAGE_PART = '{"type":"image_url","image_url":{"url":{url}}}'


def openai_base_url(base_url: str | None) -> str:
    """``base_url``, else OpenAI's (ending in /v1)."""
    return (base_url or DEFAULT_BASE_URL).rstrip("/")


def openai_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header for ``api_key``; a clear error without one."""
    if not api_key:
        raise ConfigError(
            "OPENAI_API_KEY is not set: export it (or pass api_key to the provider "
            "resource), or use --provider emulator to try the platform without a key."
        )
    return {"Authorization": f"Bearer {api_key}"}


def chat_body_expr(spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
    """The encoded ``/chat/completions`` body of every row."""
    head: dict[str, Any] = {"model": spec.model, **spec.params}
    if spec.cache and spec.cache_key and "prompt_cache_key" not in head:
        head["prompt_cache_key"] = spec.cache_key
    if spec.response_schema is not None:
        head["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": spec.schema_name,
                "schema": spec.response_schema,
                "strict": True,
            },
        }
    system = (
        '{"role":"system","content":' + json_literal(spec.system) + "},"
        if spec.system is not None
        else ""
    )
    body = pl.concat_str(
        [
            pl.lit('{"messages":[' + system + '{"role":"user","content":'),
            user_content_expr(user, image, IMAGE_PART),
            pl.lit("}]}"),
        ]
    )
    return splice_params(body, head)


def parse_chat_completion(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion body -> a result row; refusals and content filters are ``refused``."""
    usage = body.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    row: dict[str, Any] = {
        "custom_id": custom_id,
        "billed": True,
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "cached_input_tokens": cached,
        "cache_write_tokens": 0,
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        reason = message.get("refusal") or "content filtered"
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=str(reason))
        return row
    row.update(status="succeeded", response=message.get("content") or "")
    return row
