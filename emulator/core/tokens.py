"""Deterministic token counting shared by every endpoint of the emulator.

The platform's cost estimator is calibrated against these formulas, so they are the contract:

- ``count_tokens(text) = max(1, (len(text) + 3) // 4)``: one token per started group of four
  characters, and at least one token (also for the empty string).
- prompt tokens of a chat/messages request: for every message (the system prompt counts as one
  message) ``count_tokens(text of its content) + 3``, plus 3 for the reply priming. The text of
  a content list is its text parts joined with a single space; image parts count nothing.
- completion tokens: ``count_tokens(reply text)``.
- embeddings: ``sum(count_tokens(item))`` over the input strings.
"""

from typing import Any

MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3


def count_tokens(text: str) -> int:
    """Tokens in ``text``: ``max(1, (len(text) + 3) // 4)``."""
    return max(1, (len(text) + 3) // 4)


def content_text(content: Any) -> str:
    """Text of a message content: a string, or text parts joined with a space (images ignored)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and "text" in part
        )
    return ""


def prompt_tokens(messages: list[Any], system: Any = None) -> int:
    """Prompt tokens of a message list (plus an optional top-level system prompt)."""
    total = REPLY_PRIMING
    if system:
        total += count_tokens(content_text(system)) + MESSAGE_OVERHEAD
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        total += count_tokens(content_text(content)) + MESSAGE_OVERHEAD
    return total
