"""OpenAI's flex tier: ``POST /chat/completions`` (or ``/responses``) with ``service_tier:
"flex"``, one request per row, billed at batch prices.

Flex answers synchronously but slowly, and answers 429 "resource unavailable" when it has no
capacity (not billed): the real-time engine retries those with backoff, more times and with a
longer timeout than standard real-time (OpenAI advises 15 minutes), and the pipeline's retry
policy sends a row that still failed again as ``rate_limited``.
"""

import dataclasses
from typing import ClassVar

from pydantic import Field

from maple_engine.model import BATCH_PRICED_PREFIX, CHAT
from maple_engine.providers.base import ProviderCapabilities
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider

FLEX_TIMEOUT_S = 900.0


class OpenAIFlexProvider(OpenAIRealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions`` on the flex tier, one request per row."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        OpenAIRealtimeProvider.capabilities,
        batch_prices=True,
        kinds=frozenset({CHAT}),  # the flex tier serves chat (and Responses) models only
    )
    batch_id_prefix: ClassVar[str] = BATCH_PRICED_PREFIX
    service_tier: ClassVar[str | None] = "flex"

    name: str = Field(default="openai-flex", description="Provider name in costs/output.")
    timeout_s: float = Field(
        default=FLEX_TIMEOUT_S, description="HTTP timeout per request, seconds (flex is slow)."
    )
    max_attempts: int = Field(
        default=12, description="Sends per request within one attempt (flex 429s, 5xx, timeouts)."
    )
