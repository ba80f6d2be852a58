"""Each provider's prompt cache, modelled on the shared prefix of its requests.

A prefix is cached per organisation (the API key), model and exact prefix text. The first
request whose prefix reaches the model's minimum writes it; later requests of the same
organisation within its TTL (refreshed by every read) read it, batch lines of one batch
included, in order. Tokens are counted as everywhere in the emulator (``emulator.core.tokens``); the
prefix is its message's tokens including the 3 of framing.

- Anthropic: the prefix ends at the last ``system`` block carrying ``cache_control``; TTL 5 min,
  or 1 h with ``"ttl": "1h"``. Usage: ``cache_read_input_tokens``, ``cache_creation_input_tokens``
  (and ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``), and
  ``input_tokens`` counts only the rest.
- OpenAI: automatic on a leading system/developer message of 1,024+ tokens, in 128-token steps;
  TTL 5 min. Usage: ``prompt_tokens_details.cached_tokens`` (of ``prompt_tokens``); writes free.
- Gemini: implicit on ``systemInstruction`` of 1,024+ tokens (4,096 on Pro models); TTL 5 min.
  Usage: ``cachedContentTokenCount`` (of ``promptTokenCount``); writes free.

``/_emulator/stats``: ``cache_read_tokens`` (tokens read, all providers) and
``cache_write_tokens`` (tokens billed as cache writes: Anthropic's only).
"""

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.core.tokens import MESSAGE_OVERHEAD, content_text, count_tokens

FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0
# Anthropic's minimum cacheable prompt per model (a fragment of the model id); others 1,024.
CLAUDE_MINIMUMS = (
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("sonnet-4-6", 2048),
    ("haiku", 2048),
)
OPENAI_MINIMUM, OPENAI_STEP = 1024, 128
GEMINI_MINIMUMS = (("pro", 4096),)


def _minimum(model: str, table: tuple[tuple[str, int], ...], default: int = 1024) -> int:
    return next((n for part, n in table if part in model.lower()), default)


@dataclass(frozen=True)
class CacheUse:
    """What one request read from and wrote to the cache, in tokens."""

    read: int = 0
    write: int = 0
    ttl: float = FIVE_MINUTES


class PromptCache:
    """Live prefixes by (provider, organisation, model, prefix digest) -> expiry time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str, str, str], float] = {}

    def use(self, key: tuple[str, str, str, str], tokens: int, ttl: float) -> CacheUse:
        """Read the prefix ``key`` if it is live, else write it; either way it lives ``ttl``."""
        now = self._clock()
        with self._lock:
            live = self._until.get(key, 0.0) > now
            self._until[key] = now + ttl
        return CacheUse(read=tokens, ttl=ttl) if live else CacheUse(write=tokens, ttl=ttl)

    def anthropic(self, org: str, params: dict[str, Any]) -> CacheUse:
        """The cache use of a Messages body (``cache_control`` on its system blocks)."""
        system = params.get("system")
        if not isinstance(system, list):
            return CacheUse()
        marked = [i for i, b in enumerate(system) if isinstance(b, dict) and b.get("cache_control")]
        if not marked:
            return CacheUse()
        prefix = content_text(system[: marked[-1] + 1])
        tokens = count_tokens(prefix) + MESSAGE_OVERHEAD
        model = str(params.get("model", ""))
        if tokens < _minimum(model, CLAUDE_MINIMUMS):
            return CacheUse()
        control = system[marked[-1]]["cache_control"]
        ttl = ONE_HOUR if isinstance(control, dict) and control.get("ttl") == "1h" else FIVE_MINUTES
        return self.use(("anthropic", org, model, _digest(prefix)), tokens, ttl)

    def openai(self, org: str, body: dict[str, Any]) -> CacheUse:
        """The cache use of a chat body: its leading system/developer message, if long enough."""
        prefix = _openai_prefix(body)
        if prefix is None:
            return CacheUse()
        tokens = count_tokens(prefix) + MESSAGE_OVERHEAD
        if tokens < OPENAI_MINIMUM:
            return CacheUse()
        cached = tokens - (tokens - OPENAI_MINIMUM) % OPENAI_STEP
        use = self.use(("openai", org, str(body.get("model")), _digest(prefix)), cached, 300)
        return CacheUse(read=use.read)  # writes are free and not reported

    def gemini(self, org: str, model: str, request: dict[str, Any]) -> CacheUse:
        """The implicit cache use of a GenerateContentRequest (its ``systemInstruction``)."""
        instruction = request.get("systemInstruction") or request.get("system_instruction")
        parts = instruction.get("parts") if isinstance(instruction, dict) else None
        if not isinstance(parts, list):
            return CacheUse()
        prefix = " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        tokens = count_tokens(prefix) + MESSAGE_OVERHEAD
        if tokens < _minimum(model, GEMINI_MINIMUMS):
            return CacheUse()
        use = self.use(("gemini", org, model, _digest(prefix)), tokens, FIVE_MINUTES)
        return CacheUse(read=use.read)


def has_openai_prefix(body: dict[str, Any]) -> bool:
    """Whether a chat body's leading system message is long enough to be cached."""
    prefix = _openai_prefix(body)
    return prefix is not None and count_tokens(prefix) + MESSAGE_OVERHEAD >= OPENAI_MINIMUM


def _openai_prefix(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return None
    if messages[0].get("role") not in ("system", "developer"):
        return None
    return content_text(messages[0].get("content"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def anthropic_usage(message: dict[str, Any], use: CacheUse) -> None:
    """Move ``use``'s tokens out of a ``message``'s ``input_tokens`` into its cache fields."""
    usage = message["usage"]
    usage["input_tokens"] -= use.read + use.write
    usage["cache_read_input_tokens"] = use.read
    usage["cache_creation_input_tokens"] = use.write
    one_hour = use.write if use.ttl == ONE_HOUR else 0
    usage["cache_creation"] = {
        "ephemeral_5m_input_tokens": use.write - one_hour,
        "ephemeral_1h_input_tokens": one_hour,
    }


def openai_usage(completion: dict[str, Any], use: CacheUse) -> None:
    if "usage" in completion:  # an answer without usage (``--no-usage``) reports nothing
        completion["usage"]["prompt_tokens_details"]["cached_tokens"] = use.read


def gemini_usage(response: dict[str, Any], use: CacheUse) -> None:
    if use.read:
        response["usageMetadata"]["cachedContentTokenCount"] = use.read


def organisation(headers: Any) -> str:
    """The organisation a request bills to: its API key (any header that carries one)."""
    key = headers.get("x-api-key") or headers.get("x-goog-api-key") or ""
    scheme, _, token = str(headers.get("authorization", "")).partition(" ")
    return str(key or (token if scheme.lower() == "bearer" else ""))
