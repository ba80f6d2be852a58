"""Providers by name: what ``--provider`` and ``enrichment(provider=...)`` accept.

Each name maps to how its provider is built and to its `ProviderCapabilities`, which are read by
name before anything is built (the CLI and ``enrichment()`` check a job before any I/O). Building
``_BATCH`` makes mypy check every batch provider class against the `BatchProvider` protocol.
`describe` says what each name is (``maple providers``, docs/providers.md).
"""

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, cast

from maple_engine.errors import ConfigError
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.anthropic.realtime import AnthropicRealtimeProvider
from maple_engine.providers.azure.batch import AzureOpenAIBatchProvider
from maple_engine.providers.azure.realtime import AzureOpenAIRealtimeProvider
from maple_engine.providers.base import (
    TYPICAL_BATCH_PRICE_SHARE,
    BatchProvider,
    ProviderCapabilities,
    ProviderModel,
)
from maple_engine.providers.bedrock.batch import BedrockBatchProvider
from maple_engine.providers.bedrock_openai.batch import BedrockOpenAIBatchProvider
from maple_engine.providers.bedrock_openai.realtime import BedrockOpenAIRealtimeProvider
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from maple_engine.providers.gemini.realtime import (
    GeminiFlexProvider,
    GeminiPriorityProvider,
    GeminiRealtimeProvider,
)
from maple_engine.providers.http import check_base_url
from maple_engine.providers.mistral.batch import MistralBatchProvider
from maple_engine.providers.mistral.realtime import MistralRealtimeProvider
from maple_engine.providers.openai import emulator
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.openai.compatible import (
    GENERIC,
    PROFILES,
    provider_class,
    realtime_class,
)
from maple_engine.providers.openai.flex import OpenAIFlexProvider
from maple_engine.providers.openai.priority import OpenAIPriorityProvider
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.openai.server import OpenAIServerProvider
from maple_engine.providers.openai.webhooks import WIRE as OPENAI_EVENTS
from maple_engine.providers.openrouter.batch import OpenRouterBatchProvider
from maple_engine.providers.openrouter.realtime import OpenRouterRealtimeProvider
from maple_engine.providers.pushed import EventWire
from maple_engine.providers.realtime import RealtimeProvider
from maple_engine.settings import (
    BEDROCK_ROLE_ENV,
    EMULATOR_URL_ENV,
    admin_key_env,
    workspace_keys_env,
)

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
    BedrockOpenAIBatchProvider,
    OpenRouterBatchProvider,
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
    "bedrock-openai": _of(BedrockOpenAIBatchProvider, "storage_root"),
    "openrouter": _of(OpenRouterBatchProvider, "intent_root"),
    "openai-realtime": _of(OpenAIRealtimeProvider, "checkpoint_root"),
    "openai-flex": _of(OpenAIFlexProvider, "checkpoint_root"),
    "openai-priority": _of(OpenAIPriorityProvider, "checkpoint_root"),
    "openai-server": _of(OpenAIServerProvider, "checkpoint_root"),
    "anthropic-realtime": _of(AnthropicRealtimeProvider, "checkpoint_root"),
    "gemini-realtime": _of(GeminiRealtimeProvider, "checkpoint_root"),
    "gemini-flex": _of(GeminiFlexProvider, "checkpoint_root"),
    "gemini-priority": _of(GeminiPriorityProvider, "checkpoint_root"),
    "azure-openai-realtime": _of(AzureOpenAIRealtimeProvider, "checkpoint_root"),
    "mistral-realtime": _of(MistralRealtimeProvider, "checkpoint_root"),
    "bedrock-openai-realtime": _of(BedrockOpenAIRealtimeProvider, "checkpoint_root"),
    "openrouter-realtime": _of(OpenRouterRealtimeProvider, "checkpoint_root"),
    # and their real-time twins: the same API's chat completions, one request per row
    **{p.realtime_name: _of(realtime_class(p), "checkpoint_root") for p in PROFILES},
}
DEFAULT_PROVIDER = "openai"


#: The providers that push batch events, under their capabilities' ``webhooks`` name: how
#: `maple webhooks` verifies and reads a delivery at ``/webhooks/<name>``.
PUSHED_EVENTS: dict[str, EventWire] = {"openai": OPENAI_EVENTS}


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
    base_url = overrides.get("base_url")
    if base_url:
        variable = entry.capabilities.variable("base_url")
        check_base_url(str(base_url), f"the base URL ({variable} or --base-url)")
    if entry.root_field is not None and storage_root is not None:
        overrides.setdefault(entry.root_field, storage_root)
    if entry.capabilities.runs_on_emulator:
        return entry.build(emulator_url, **overrides)
    return entry.build(**overrides)


Lane = Literal["batch", "realtime", "flex", "priority"]
LANES: tuple[Lane, ...] = ("batch", "realtime", "flex", "priority")
#: the kinds as ``maple providers`` names them
KIND_LABELS = {"chat": "chat", "embedding": "embeddings"}
#: the family of ``MAPLE_API_KEY`` and ``MAPLE_BASE_URL``: an OpenAI-compatible API the user names
_FAMILY_OF_CREDENTIALS = {"maple": GENERIC}


@dataclasses.dataclass(frozen=True)
class ProviderInfo:
    """What one ``--provider`` name is, as ``maple providers`` lists it (docs/providers.md
    explains each field)."""

    name: str
    family: str  # whose API and credentials it speaks: names of one family share a key
    kinds: tuple[str, ...]  # chat, embeddings
    files: tuple[str, ...]  # the kinds of file a chat job may send it (--file-column)
    lanes: tuple[Lane, ...]  # its own lane, then those a --deadline reaches through its twins
    batch_discount: float | None  # the share taken off the real-time price; None: not batch-priced
    max_requests_per_batch: int  # per batch file (a real-time name: per shard attempt)
    max_batch_bytes: int
    results_retention_s: int | None  # how long a finished batch's results stay downloadable
    env: tuple[str, ...]  # the variables Maple reads for it

    def as_json(self) -> dict[str, Any]:
        """The JSON object ``maple providers --format json`` prints (tuples as lists)."""
        fields = dataclasses.asdict(self)
        return {key: list(v) if isinstance(v, tuple) else v for key, v in fields.items()}


def describe() -> tuple[ProviderInfo, ...]:
    """Every registered name, in registry order, as `ProviderInfo`."""
    return tuple(describe_one(name) for name in PROVIDERS)


def describe_one(name: str) -> ProviderInfo:
    """``name`` as `ProviderInfo` (ConfigError if unknown)."""
    caps = capabilities(name)
    own = own_lane(name)
    share = caps.batch_price_share
    share = TYPICAL_BATCH_PRICE_SHARE if share is None else share
    return ProviderInfo(
        name=name,
        family=family(caps),
        kinds=tuple(label for kind, label in KIND_LABELS.items() if kind in _kind_names(caps)),
        files=tuple(k for k in ("pdf", "image", "audio") if caps.files and k in caps.files.kinds),
        lanes=lanes(name),
        batch_discount=round(1 - share, 6) if own in ("batch", "flex") else None,
        max_requests_per_batch=caps.limits.max_requests,
        max_batch_bytes=caps.limits.max_bytes,
        results_retention_s=caps.results_retention_s,
        env=env(caps),
    )


def family(caps: ProviderCapabilities) -> str:
    """Whose API and credentials ``caps`` speaks: ``openai``, ``azure-openai``, ``bedrock``."""
    if caps.family is not None:
        return caps.family
    if caps.credentials is None:
        raise ConfigError("a provider with no credentials must name its family")
    return _FAMILY_OF_CREDENTIALS.get(caps.credentials, caps.credentials.replace("_", "-"))


def own_lane(name: str) -> Lane:
    """The lane ``name`` itself sends on: a batch API, or real time at the standard price, at
    batch prices (flex), or as another name's priority twin (priority)."""
    caps = capabilities(name)
    if caps.mode == "batch":
        return "batch"
    if caps.batch_prices:
        return "flex"
    priority = {entry.capabilities.priority_twin for entry in _REGISTRY.values()}
    return "priority" if name in priority else "realtime"


def lanes(name: str) -> tuple[Lane, ...]:
    """``name``'s own lane and those its twins add under a ``--deadline``, in `LANES` order."""
    caps = capabilities(name)
    twins = {"realtime": caps.realtime_twin, "flex": caps.flex_twin, "priority": caps.priority_twin}
    found = {own_lane(name), *(lane for lane, twin in twins.items() if twin is not None)}
    return tuple(lane for lane in LANES if lane in found)


def env(caps: ProviderCapabilities) -> tuple[str, ...]:
    """The variables read for a provider of ``caps``: its API key, base URL and version, the
    admin and workspace keys of its family, Bedrock's role and SDK chain, the emulator's URL."""
    cred = caps.credentials
    found: list[str] = []
    if cred is not None:
        found += [caps.variable("api_key"), caps.variable("base_url")]
        if caps.takes_api_version:
            found.append(caps.variable("version"))
        if caps.billing_report is not None:
            found.append(admin_key_env(cred))
        if caps.attribution == "workspace-key":
            found.append(workspace_keys_env(cred))
    if caps.takes_role_arn:
        found.append(BEDROCK_ROLE_ENV)
    if caps.runs_on_emulator:
        found.append(EMULATOR_URL_ENV)
    return (*found, *caps.sdk_env)


def _kind_names(caps: ProviderCapabilities) -> set[str]:
    return {kind.name for kind in caps.kinds}
