"""Provider resources by name: what ``--provider`` and ``enrichment(provider=...)`` accept."""

from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.bedrock.batch import BedrockBatchProvider
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from maple_engine.providers.gemini.realtime import GeminiRealtimeProvider
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.realtime.providers import (
    AnthropicRealtimeProvider,
    OpenAIRealtimeProvider,
)

BATCH_PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "emulator")
REALTIME_PROVIDERS = ("openai-realtime", "anthropic-realtime", "gemini-realtime")
PROVIDERS = (*BATCH_PROVIDERS, *REALTIME_PROVIDERS)


def build_provider(
    name: str, emulator_url: str | None = None, storage_root: str | None = None, **overrides: Any
) -> Any:
    """The provider resource for ``name``; ``emulator`` is OpenAI's batch API on the emulator.

    ``storage_root`` is the job's storage root: the Anthropic batch provider keeps its create
    intents there and the real-time providers their row checkpoints.
    """
    if name == "openai":
        return OpenAIBatchProvider(**overrides)
    if name == "emulator":
        if emulator_url is None:
            raise ConfigError("provider 'emulator' needs a running emulator URL")
        return OpenAIBatchProvider(
            name="emulator", base_url=f"{emulator_url}/v1", api_key="emulator", **overrides
        )
    if name == "gemini":
        return GeminiBatchProvider(**overrides)
    if name == "bedrock":
        if storage_root is not None:
            overrides.setdefault("storage_root", storage_root)
        return BedrockBatchProvider(**overrides)
    if name == "anthropic":
        if storage_root is not None:
            overrides.setdefault("intent_root", storage_root)
        return AnthropicBatchProvider(**overrides)
    realtime = {
        "openai-realtime": OpenAIRealtimeProvider,
        "anthropic-realtime": AnthropicRealtimeProvider,
        "gemini-realtime": GeminiRealtimeProvider,
    }
    if name in realtime:
        if storage_root is not None:
            overrides.setdefault("checkpoint_root", storage_root)
        return realtime[name](**overrides)
    raise ConfigError(f"Unknown provider {name!r}: choose one of {list(PROVIDERS)}.")
