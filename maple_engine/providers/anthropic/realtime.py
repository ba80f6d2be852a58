"""Anthropic real time: ``POST /v1/messages``, one request per row (real-time prices).

The real-time core's settings and hooks are `maple_engine.providers.realtime.RealtimeProvider`
(sending is `maple_engine.send`); this module is Anthropic's wire format and rate-limit
headers. A spend limit reached is a quota error: the attempt stops sending.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field

from maple_engine.failures import FailureClass
from maple_engine.providers.anthropic import params
from maple_engine.providers.anthropic.file_parts import FILES
from maple_engine.providers.anthropic.messages import (
    ANTHROPIC_VERSION,
    anthropic_base_url,
    anthropic_headers,
    check_version_params,
    checked_version,
    classify_error,
    claude_caching,
    message_body_expr,
    parse_message,
)
from maple_engine.providers.anthropic.workspaces import WorkspaceKeys
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.http import error_detail
from maple_engine.providers.realtime import (
    LimitHeaders,
    RateLimits,
    RealtimeProvider,
    read_limit_headers,
    realtime_capabilities,
)

#: Anthropic's ``anthropic-ratelimit-*`` headers (resets are RFC 3339 timestamps)
LIMIT_HEADERS: LimitHeaders = (
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
)
CACHING = claude_caching()  # 5 minutes, refreshed by every read: rows follow each other closely


class AnthropicRealtimeProvider(WorkspaceKeys, RealtimeProvider):
    """Anthropic ``POST /v1/messages``, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        realtime_capabilities(
            Dialect.ANTHROPIC,
            "anthropic",
            "anthropic",
            drops_empty_system=True,
            caching=CACHING,
            rules=params.RULES,
        ),
        takes_api_version=True,
        attribution="workspace-key",
        files=FILES,
    )

    name: str = Field(default="anthropic-realtime", description="Provider name in costs/output.")
    api_version: str = Field(
        default=ANTHROPIC_VERSION,
        description="The anthropic-version sent (ANTHROPIC_VERSION): 2023-06-01 or 2026-10-21.",
    )

    def endpoint(self) -> str:
        return "/v1/messages"

    def resolved_base_url(self) -> str:
        return anthropic_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return anthropic_headers(self.sending_key(self.api_key), checked_version(self.api_version))

    def read_limits(self, headers: Mapping[str, str], now_epoch: float) -> RateLimits:
        return read_limit_headers(headers, LIMIT_HEADERS, now_epoch)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        check_version_params(self.api_version, spec.params)
        return message_body_expr(spec, user, image, cache_ttl_s=CACHING.ttl_s, files=files)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return parse_message(custom_id, body)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, _, error_type = error_detail(response)
        if _spend_limit(response):
            return FailureClass.INSUFFICIENT_QUOTA.value, message
        return classify_error(error_type, message, response.status_code), message


def _spend_limit(response: httpx.Response) -> bool:
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return False
    details = (body.get("error") or {}).get("details") if isinstance(body, dict) else None
    return isinstance(details, dict) and details.get("error_code") == "enforced_spend_limit_reached"
