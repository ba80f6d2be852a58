"""The flex and priority service tiers: OpenAI's chat completions (and Responses) and Gemini's
``generateContent``.

An OpenAI request with ``"service_tier": "flex"`` (Gemini: ``"serviceTier": "flex"``) is answered
more slowly (``flex_delay_s``); OpenAI's answer echoes ``service_tier: "flex"``. Flex is billed
at batch prices (half the standard rate), which the client prices from the tier.
``--flex-unavailable RATE`` answers that share of flex requests 429 (OpenAI:
``resource_unavailable``; Gemini: ``RESOURCE_EXHAUSTED``), not billed, drawn from the seed.
Stats: ``flex_requests`` (every flex request), ``flex_429`` (those answered 429).

An OpenAI request with ``"service_tier": "priority"`` is answered faster (the real-time latency
divided by ``priority_speedup``), its answer echoes ``service_tier: "priority"``, and it is billed
at twice the standard price (`emulator.core.billing.PRIORITY_MULTIPLE`), which the usage and cost
reports show under that service tier. Stats: ``priority_requests``.
"""

import random
import threading
from typing import Any

FLEX = "flex"
PRIORITY = "priority"
RETRY_AFTER_S = 0.1  # the wait a flex 429 asks for (retry-after-ms; Gemini's RetryInfo)
UNAVAILABLE_MESSAGE = (
    "Resource unavailable: flex processing capacity is temporarily exhausted. Retry with "
    "backoff, or send the request on the default service tier."
)


class FlexTier:
    """Draws which flex requests find no capacity, deterministically from a seed."""

    def __init__(self, seed: int, unavailable: float) -> None:
        self.unavailable = unavailable
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def draw_unavailable(self) -> bool:
        if self.unavailable <= 0:
            return False
        with self._lock:
            return self._random.random() < self.unavailable


def is_flex(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("service_tier") == FLEX


def is_priority(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("service_tier") == PRIORITY
