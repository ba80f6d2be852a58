"""OpenAI's flex tier: ``POST /chat/completions`` (or ``/responses``) with ``service_tier:
"flex"``, one request per row, billed at batch prices.

Flex answers synchronously but slowly, and answers 429 "resource unavailable" when it has no
capacity (not billed): the real-time engine retries those with backoff, more times and with a
longer timeout than standard real-time (OpenAI advises 15 minutes), and the pipeline's retry
policy sends a row that still failed again as ``rate_limited``.
"""

import dataclasses
from typing import Any, ClassVar

import polars as pl
from pydantic import Field

from maple_engine.model import BATCH_PRICED_PREFIX, CHAT
from maple_engine.providers.base import ProviderCapabilities, RequestSpec
from maple_engine.providers.openai import wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import Group, on_tier

SERVICE_TIER = {"service_tier": "flex"}
FLEX_TIMEOUT_S = 900.0


class OpenAIFlexProvider(OpenAIRealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions`` on the flex tier, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        OpenAIRealtimeProvider.capabilities,
        batch_prices=True,
        kinds=frozenset({CHAT}),  # the flex tier serves chat (and Responses) models only
    )
    batch_id_prefix: ClassVar[str] = BATCH_PRICED_PREFIX

    name: str = Field(default="openai-flex", description="Provider name in costs/output.")
    timeout_s: float = Field(
        default=FLEX_TIMEOUT_S, description="HTTP timeout per request, seconds (flex is slow)."
    )
    max_attempts: int = Field(
        default=12, description="Sends per request within one attempt (flex 429s, 5xx, timeouts)."
    )

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        flex = dataclasses.replace(spec, params={**spec.params, **SERVICE_TIER})
        return wire.body_expr(flex, user, image, files=files)

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """Chat rows on the flex tier, whoever encoded them (a batch's rows under a deadline)."""
        if rows and not rows[0][1].startswith(wire.EMBEDDING_HEAD):
            rows = on_tier(rows, "service_tier", SERVICE_TIER["service_tier"])
        return super().requests_of(rows)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return wire.parse_reply(custom_id, body)
