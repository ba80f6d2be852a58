"""OpenAI's flex service tier on the chat-completions endpoint.

A request with ``"service_tier": "flex"`` is answered more slowly (``flex_delay_s``) and echoes
``service_tier: "flex"``; flex is billed at batch prices (half the standard rate), which the
client prices from the tier. ``--flex-unavailable RATE`` answers that share of flex requests 429
``resource_unavailable`` (not billed, drawn from the seed). Stats: ``flex_requests`` (every flex
request), ``flex_429`` (those answered 429).
"""

import random
import threading
from typing import Any

FLEX = "flex"
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
