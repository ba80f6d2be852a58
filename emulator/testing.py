"""Test support for code that runs against the emulator: JSONL builders and SDK clients.

The SDKs are test-only dependencies, so they are imported lazily.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import orjson

from emulator.server import EmulatorServer

if TYPE_CHECKING:
    import anthropic
    import openai

#: ``make_emulator(**config_kwargs)`` fixture type.
MakeEmulator = Callable[..., AbstractContextManager[EmulatorServer]]
#: ``openai_schema(name, instance)`` fixture type.
SchemaCheck = Callable[[str, Any], None]

CHAT = "/v1/chat/completions"


def chat_body(text: str, model: str = "gpt-4o-mini", **extra: Any) -> dict[str, Any]:
    """A chat completion body with one user message."""
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def chat_line(custom_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """One OpenAI batch input line."""
    return {"custom_id": custom_id, "method": "POST", "url": CHAT, "body": chat_body(text, **extra)}


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    """Lines as JSONL bytes."""
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def parse_jsonl(data: bytes) -> list[dict[str, Any]]:
    """JSONL bytes as a list of objects."""
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def message_request(custom_id: str, text: str, **params: Any) -> dict[str, Any]:
    """One Anthropic batch request."""
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
    }
    return {"custom_id": custom_id, "params": {**body, **params}}


def openai_client(server: EmulatorServer, **kwargs: Any) -> "openai.OpenAI":
    """An OpenAI SDK client pointed at ``server`` (no retries unless asked)."""
    import openai

    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", **kwargs)


def anthropic_client(server: EmulatorServer, **kwargs: Any) -> "anthropic.Anthropic":
    """An Anthropic SDK client pointed at ``server`` (no retries unless asked)."""
    import anthropic

    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(base_url=server.url, api_key="test-key", **kwargs)
