"""OpenAI's priority tier: ``POST /chat/completions`` (or ``/responses``) with ``service_tier:
"priority"``, one request per row: faster than standard real time, at a higher price.

A deadline's last lane (`maple_engine.send.deadline_lanes`): the rows still unanswered when
standard real time may no longer be in time. Booked at the tier's price (``priority_multiple``
times the standard price, 2 unless the price file says otherwise: `maple_engine.ledger.pricing`).
"""

import dataclasses
from typing import ClassVar

from pydantic import Field

from maple_engine.model import CHAT, PRIORITY_PREFIX
from maple_engine.providers.base import ProviderCapabilities
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider


class OpenAIPriorityProvider(OpenAIRealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions`` on the priority tier, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        OpenAIRealtimeProvider.capabilities,
        kinds=frozenset({CHAT}),  # the priority tier serves chat (and Responses) models only
    )
    batch_id_prefix: ClassVar[str] = PRIORITY_PREFIX
    service_tier: ClassVar[str | None] = "priority"

    name: str = Field(default="openai-priority", description="Provider name in costs/output.")
