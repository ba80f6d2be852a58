"""OpenAI real time: ``POST /chat/completions``, one request per row (real-time prices).

The shared real-time engine (pacing, adaptive concurrency, retries, checkpoints) is
`maple_engine.providers.realtime.providers.RealtimeProvider`; this module is OpenAI's wire format.
"""

from typing import Any, ClassVar

import httpx
import polars as pl
from pydantic import Field

from maple_engine.failures import FailureClass, classify_http
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.http import error_detail, is_quota_error
from maple_engine.providers.openai import wire
from maple_engine.providers.realtime.providers import RealtimeProvider, realtime_capabilities


class OpenAIRealtimeProvider(RealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions``, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = realtime_capabilities(
        Dialect.OPENAI, "openai", "openai", caching=wire.CACHING
    )

    name: str = Field(default="openai-realtime", description="Provider name in costs/output.")

    def endpoint(self) -> str:
        return "/chat/completions"

    def resolved_base_url(self) -> str:
        return wire.openai_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return wire.openai_headers(self.api_key)

    def body_expr(self, spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
        return wire.chat_body_expr(spec, user, image)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return wire.parse_chat_completion(custom_id, body)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, code, error_type = error_detail(response)
        if response.status_code == 429 and is_quota_error(response):
            return FailureClass.INSUFFICIENT_QUOTA.value, message
        if response.status_code == 429 and "too large" in message.lower():
            return FailureClass.INVALID_REQUEST.value, message
        return classify_http(response.status_code, code, error_type).value, message
