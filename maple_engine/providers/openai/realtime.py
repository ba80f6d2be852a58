"""OpenAI real time: ``POST /chat/completions``, one request per row, or ``POST /embeddings``
with several rows' texts per request (real-time prices).

The real-time core's settings and hooks are `maple_engine.providers.realtime.RealtimeProvider`
(sending is `maple_engine.send`); this module is OpenAI's wire format and rate-limit headers.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import polars as pl
from pydantic import Field

from maple_engine.failures import FailureClass, classify_http
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.http import error_detail, is_quota_error
from maple_engine.providers.openai import params, wire
from maple_engine.providers.openai.file_parts import FILES
from maple_engine.providers.openai.user_files import user_file
from maple_engine.providers.realtime import (
    Group,
    LimitHeaders,
    RateLimits,
    RealtimeProvider,
    Row,
    on_tier,
    read_limit_headers,
    realtime_capabilities,
)

#: OpenAI's ``x-ratelimit-*`` headers (resets are Go durations: ``120ms``, ``1s``, ``6m0s``)
LIMIT_HEADERS: LimitHeaders = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)


class OpenAIRealtimeProvider(RealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions``, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = realtime_capabilities(
        Dialect.OPENAI,
        "openai",
        "openai",
        caching=wire.CACHING,
        kinds=frozenset({CHAT, EMBEDDING}),
        models=wire.MODELS,
        endpoints=frozenset({"chat", "responses"}),
        reasoning_models=wire.REASONING_MODELS,
        attribution="project-header",
        rules=params.RULES,
        files=FILES,
    )

    #: the ``service_tier`` every chat request goes on (flex, priority), whoever encoded it (a
    #: batch's rows under a deadline); None: the project's default
    service_tier: ClassVar[str | None] = None

    name: str = Field(default="openai-realtime", description="Provider name in costs/output.")
    inputs_per_request: int = Field(
        default=wire.INPUTS_PER_REQUEST,
        ge=1,
        le=wire.MAX_INPUTS_PER_REQUEST,
        description="Embedding jobs: most rows' texts in one /embeddings request.",
    )

    def endpoint(self) -> str:
        return "/chat/completions"

    def upload_user_file(self, digest: str, file: AttachedFile) -> UploadedFile:
        """``file`` uploaded for use in requests (`user_files.user_file`): Chat Completions
        takes an uploaded PDF's ``file_id`` in real time as in a batch
        (https://developers.openai.com/api/docs/guides/file-inputs)."""
        with self.control_client() as client:
            return user_file(client, digest, file, {}, self.max_attempts)

    def resolved_base_url(self) -> str:
        return wire.openai_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return wire.openai_headers(self.api_key)

    def read_limits(self, headers: Mapping[str, str], now_epoch: float) -> RateLimits:
        return read_limit_headers(headers, LIMIT_HEADERS, now_epoch)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        if self.service_tier is not None:
            tier = {"service_tier": self.service_tier}
            spec = dataclasses.replace(spec, params={**spec.params, **tier})
        return wire.body_expr(spec, user, image, files=files)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return wire.parse_reply(custom_id, body)

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """Chat and Responses rows one per request (to the API their bodies are for), on the
        provider's tier if it has one; embedding rows several per ``/embeddings`` request."""
        path = wire.path_of_body(rows[0][1]) if rows else wire.CHAT_PATH
        if path == wire.EMBEDDINGS_PATH:
            return path, wire.embedding_groups(rows, self.inputs_per_request)
        if self.service_tier is not None:
            rows = on_tier(rows, "service_tier", self.service_tier)
        return path, [((custom_id,), body) for custom_id, body in rows]

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        if body.get("object") == "list":
            return wire.parse_embedding_group(custom_ids, body)
        return super().parse_group(custom_ids, body)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, code, error_type = error_detail(response)
        if response.status_code == 429 and is_quota_error(response):
            return FailureClass.INSUFFICIENT_QUOTA.value, message
        if response.status_code == 429 and "too large" in message.lower():
            return FailureClass.INVALID_REQUEST.value, message
        return classify_http(response.status_code, code, error_type).value, message
