"""Provider resources by name: what ``--provider`` and ``enrichment(provider=...)`` accept."""

from typing import Any

from resources.errors import ConfigError
from resources.providers.openai_batch import OpenAIBatchProvider

BATCH_PROVIDERS = ("openai", "anthropic", "emulator")
REALTIME_PROVIDERS = ("openai-realtime", "anthropic-realtime")
PROVIDERS = (*BATCH_PROVIDERS, *REALTIME_PROVIDERS)


def build_provider(name: str, emulator_url: str | None = None, **overrides: Any) -> Any:
    """The provider resource for ``name``; ``emulator`` is OpenAI's batch API on the emulator."""
    if name == "openai":
        return OpenAIBatchProvider(**overrides)
    if name == "emulator":
        if emulator_url is None:
            raise ConfigError("provider 'emulator' needs a running emulator URL")
        return OpenAIBatchProvider(
            name="emulator", base_url=f"{emulator_url}/v1", api_key="emulator", **overrides
        )
    raise ConfigError(f"Unknown provider {name!r}: choose one of {list(PROVIDERS)}.")
