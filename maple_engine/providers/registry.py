"""Providers by name: what ``--provider`` and ``enrichment(provider=...)`` accept.

Each name maps to how its provider is built and to its `ProviderCapabilities`, which are read by
name before anything is built (the CLI and ``enrichment()`` check a job before any I/O). Building
``_BATCH`` makes mypy check every batch provider class against the `BatchProvider` protocol.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, cast

from maple_engine.errors import ConfigError
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.anthropic.realtime import AnthropicRealtimeProvider
from maple_engine.providers.azure.batch import AzureOpenAIBatchProvider
from maple_engine.providers.azure.realtime import AzureOpenAIRealtimeProvider
from maple_engine.providers.base import BatchProvider, ProviderCapabilities, ProviderModel
from maple_engine.providers.bedrock.batch import BedrockBatchProvider
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from maple_engine.providers.gemini.realtime import GeminiFlexProvider, GeminiRealtimeProvider
from maple_engine.providers.mistral.batch import MistralBatchProvider
from maple_engine.providers.mistral.realtime import MistralRealtimeProvider
from maple_engine.providers.openai import emulator
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.openai.compatible import PROFILES, provider_class, realtime_class
from maple_engine.providers.openai.flex import OpenAIFlexProvider
from maple_engine.providers.openai.priority import OpenAIPriorityProvider
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.openai.server import OpenAIServerProvider
from maple_engine.providers.realtime import RealtimeProvider

#: what the registry builds: a batch provider (a `BatchProvider`), or a real-time one, which a job
#: drives through its lane (`maple_engine.send.lane`)
Built = BatchProvider | RealtimeProvider
#: every batch class checked against the `BatchProvider` protocol by mypy
_BATCH: tuple[type[BatchProvider], ...] = (
    OpenAIBatchProvider,
    AnthropicBatchProvider,
    GeminiBatchProvider,
    BedrockBatchProvider,
    MistralBatchProvider,
)


@dataclasses.dataclass(frozen=True)
class Registered:
    """One ``--provider`` name: how it is built and what it can do."""

    build: Callable[..., Built]
    capabilities: ProviderCapabilities
    root_field: str | None = None  # the setting that takes the job's storage root
    settings: frozenset[str] = frozenset()  # the settings it is built with (its fields)


def _of(provider_class: type[ProviderModel], root_field: str | None = None) -> Registered:
    """``provider_class`` registered: a batch class (a `BatchProvider`, checked in ``_BATCH``) or a
    real-time one (a `RealtimeProvider`)."""
    build = cast(Callable[..., Built], provider_class)
    fields = frozenset(provider_class.model_fields)
    return Registered(build, provider_class.capabilities, root_field, fields)


_REGISTRY: dict[str, Registered] = {
    "openai": _of(OpenAIBatchProvider),
    "anthropic": _of(AnthropicBatchProvider, "intent_root"),
    "gemini": _of(GeminiBatchProvider),
    "bedrock": _of(BedrockBatchProvider, "storage_root"),
    emulator.NAME: Registered(
        emulator.on_emulator,
        emulator.CAPABILITIES,
        settings=frozenset(OpenAIBatchProvider.model_fields) - {"base_url", "api_key"},
    ),
    # every OpenAI-compatible batch API: one profile each, run by the OpenAI batch provider
    **{profile.name: _of(provider_class(profile)) for profile in PROFILES},
    "azure-openai": _of(AzureOpenAIBatchProvider),
    "mistral": _of(MistralBatchProvider),
    "openai-realtime": _of(OpenAIRealtimeProvider, "checkpoint_root"),
    "openai-flex": _of(OpenAIFlexProvider, "checkpoint_root"),
    "openai-priority": _of(OpenAIPriorityProvider, "checkpoint_root"),
    "openai-server": _of(OpenAIServerProvider, "checkpoint_root"),
    "anthropic-realtime": _of(AnthropicRealtimeProvider, "checkpoint_root"),
    "gemini-realtime": _of(GeminiRealtimeProvider, "checkpoint_root"),
    "gemini-flex": _of(GeminiFlexProvider, "checkpoint_root"),
    "azure-openai-realtime": _of(AzureOpenAIRealtimeProvider, "checkpoint_root"),
    "mistral-realtime": _of(MistralRealtimeProvider, "checkpoint_root"),
    # and their real-time twins: the same API's chat completions, one request per row
    **{p.realtime_name: _of(realtime_class(p), "checkpoint_root") for p in PROFILES},
}
DEFAULT_PROVIDER = "openai"


def names(where: Callable[[ProviderCapabilities], bool] = lambda _: True) -> tuple[str, ...]:
    """The registered names whose capabilities pass ``where``, in the order above."""
    return tuple(name for name, entry in _REGISTRY.items() if where(entry.capabilities))


def one_of(where: Callable[[ProviderCapabilities], bool]) -> str:
    """``names(where)`` as prose: "openai, anthropic or gemini"."""
    *rest, last = names(where)
    return f"{', '.join(rest)} or {last}" if rest else last


PROVIDERS = names()
BATCH_PROVIDERS = names(lambda c: c.mode == "batch")
REALTIME_PROVIDERS = names(lambda c: c.mode == "realtime")


def _entry(name: str) -> Registered:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ConfigError(f"Unknown provider {name!r}: choose one of {list(PROVIDERS)}.")
    return entry


def capabilities(name: str) -> ProviderCapabilities:
    """What the provider ``name`` can do, without building it (ConfigError if unknown)."""
    return _entry(name).capabilities


def known_capabilities(name: str) -> ProviderCapabilities | None:
    """``capabilities(name)``, or None for a name no provider is registered under."""
    entry = _REGISTRY.get(name)
    return entry.capabilities if entry is not None else None


def takes(name: str, setting: str) -> bool:
    """Is ``setting`` one the provider ``name`` is built with (ConfigError if unknown)?"""
    return setting in _entry(name).settings


def build_provider(
    name: str, emulator_url: str | None = None, storage_root: str | None = None, **overrides: Any
) -> Built:
    """The provider ``name`` with ``overrides`` as settings.

    ``storage_root`` is the job's storage root: the Anthropic batch provider keeps its create
    intents there, Bedrock its input and output, the real-time providers their row checkpoints.
    ``emulator_url`` is where a provider that runs on the emulator finds it.
    """
    entry = _entry(name)
    if entry.root_field is not None and storage_root is not None:
        overrides.setdefault(entry.root_field, storage_root)
    if entry.capabilities.runs_on_emulator:
        return entry.build(emulator_url, **overrides)
    return entry.build(**overrides)
