"""OpenAI's priority tier: ``POST /chat/completions`` (or ``/responses``) with ``service_tier:
"priority"``, one request per row: faster than standard real time, at a higher price.

A deadline's last lane (`maple_engine.send.deadline_lanes`): the rows still unanswered when
standard real time may no longer be in time. Booked at the tier's price (``priority_multiple``
times the standard price, 2 unless the price file says otherwise: `maple_engine.ledger.pricing`).
"""

import dataclasses
from typing import ClassVar

import polars as pl
from pydantic import Field

from maple_engine.model import CHAT, PRIORITY_PREFIX
from maple_engine.providers.base import ProviderCapabilities, RequestSpec
from maple_engine.providers.openai import wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import Group, on_tier

SERVICE_TIER = {"service_tier": "priority"}


class OpenAIPriorityProvider(OpenAIRealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions`` on the priority tier, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        OpenAIRealtimeProvider.capabilities,
        kinds=frozenset({CHAT}),  # the priority tier serves chat (and Responses) models only
    )
    batch_id_prefix: ClassVar[str] = PRIORITY_PREFIX

    name: str = Field(default="openai-priority", description="Provider name in costs/output.")

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        priority = dataclasses.replace(spec, params={**spec.params, **SERVICE_TIER})
        return wire.body_expr(priority, user, image, files=files)

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """Chat rows on the priority tier, whoever encoded them (a batch's rows under a
        deadline)."""
        if rows and not rows[0][1].startswith(wire.EMBEDDING_HEAD):
            rows = on_tier(rows, "service_tier", SERVICE_TIER["service_tier"])
        return super().requests_of(rows)
