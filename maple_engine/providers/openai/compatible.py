"""Any OpenAI-compatible batch API (``/files`` + ``/batches``, OpenAI's JSONL lines), and the
vendors that document one, as data: a `Profile` per ``--provider`` name, each run by the OpenAI
batch provider (`OpenAIBatchProvider`) with the profile's capabilities and defaults.

``openai-compatible`` takes its base URL from ``--base-url`` or ``MAPLE_BASE_URL`` and its key
from ``MAPLE_API_KEY``; a vendor's profile takes its own (``TOGETHER_API_KEY``, and
``TOGETHER_BASE_URL`` to point it elsewhere: the prefix before ``/files`` and ``/batches``, so
``http://127.0.0.1:8787/v1`` is the emulator). What differs between them is data: the base URL,
the key's variable, the limits per file, the completion windows accepted, the file purpose, the
price source and batch discount. docs/operations.md says what each vendor documents.
"""

import dataclasses
import functools
from typing import Any, ClassVar

from pydantic import Field, create_model

from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING, Kind
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    MB,
    Dialect,
    ProviderCapabilities,
    ProviderLimits,
)
from maple_engine.providers.openai import params, wire
from maple_engine.providers.openai.batch import CONTROL_FIELDS, OpenAIBatchProvider
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import realtime_capabilities

GENERIC = "openai-compatible"


@dataclasses.dataclass(frozen=True)
class Profile:
    """One OpenAI-compatible batch API: what its ``--provider`` name runs with."""

    name: str
    credentials: str  # <CREDENTIALS>_API_KEY, <CREDENTIALS>_BASE_URL
    base_url: str | None  # None: the user gives it (--base-url, <CREDENTIALS>_BASE_URL)
    limits: ProviderLimits
    windows: tuple[str, ...]  # the completion windows its batches accept
    price_families: tuple[str, ...]
    kinds: frozenset[Kind] = frozenset({CHAT})
    file_purpose: str = "batch"  # the ``purpose`` of an uploaded batch input file
    batch_price_share: float | None = None  # batch price / real-time price (None: 0.5)
    # the APIs its batch lines may go to (``--endpoint``): chat completions, maybe Responses
    endpoints: frozenset[str] = frozenset({"chat"})
    # how long a finished batch's output stays downloadable (None: not documented)
    results_retention_s: int | None = None

    @property
    def realtime_name(self) -> str:
        """Its real-time twin's ``--provider`` name: the same API's chat completions (and
        embeddings where it serves them), one request per row; a deadline's fallback."""
        return f"{self.name}-realtime"

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(
            mode="batch",
            limits=self.limits,
            dialect=Dialect.OPENAI,
            rules=params.RULES,
            price_families=self.price_families,
            orphans="batch-metadata",
            kinds=self.kinds,
            credentials=self.credentials,
            completion_windows=self.windows,
            batch_price_share=self.batch_price_share,
            endpoints=self.endpoints,
            takes_extra_body=True,
            control_fields=CONTROL_FIELDS,
            realtime_twin=self.realtime_name,
            results_retention_s=self.results_retention_s,
        )

    @property
    def twin_capabilities(self) -> ProviderCapabilities:
        return realtime_capabilities(
            Dialect.OPENAI,
            self.price_families[0],
            self.credentials,
            kinds=self.kinds,
            endpoints=self.endpoints,
            rules=params.RULES,
        )


# OpenAI's request count per file, in files of at most 100 MB (Together's, Groq's).
_100_MB = dataclasses.replace(BATCH_FILE_LIMITS, max_bytes=100 * MB)
# Groq takes windows from 24 hours to 7 days.
_DAYS = tuple(f"{d}d" for d in range(1, 8))
PROFILES: tuple[Profile, ...] = (
    Profile(
        name=GENERIC,
        credentials="maple",
        base_url=None,
        limits=BATCH_FILE_LIMITS,
        windows=("24h",),
        price_families=("openai",),
        kinds=frozenset({CHAT, EMBEDDING}),
        endpoints=frozenset({"chat", "responses"}),  # what the server serves is the user's call
    ),
    Profile(
        name="together",
        credentials="together",
        base_url="https://api.together.xyz/v1",
        limits=_100_MB,
        windows=("24h",),
        price_families=("together",),
        file_purpose="batch-api",
    ),
    # Groq's batch API (https://console.groq.com/docs/batch): OpenAI's files + batches, chat
    # lines, windows of 24 hours to 7 days, "50% lower cost" than the synchronous API.
    Profile(
        name="groq",
        credentials="groq",
        base_url="https://api.groq.com/openai/v1",
        limits=_100_MB,
        windows=("24h", "48h", "72h", *_DAYS),
        price_families=("groq",),
        batch_price_share=0.5,  # 50% off real time (console.groq.com/docs/batch)
    ),
    Profile(
        name="xai",
        credentials="xai",
        base_url="https://api.x.ai/v1",
        limits=BATCH_FILE_LIMITS,
        windows=("24h",),
        price_families=("x-ai",),
        endpoints=frozenset({"chat", "responses"}),  # xAI batches take /v1/responses lines
    ),
    Profile(
        name="doubleword",
        credentials="doubleword",
        base_url="https://api.doubleword.ai/v1",
        limits=BATCH_FILE_LIMITS,
        windows=("24h", "1h"),
        price_families=("doubleword",),
        kinds=frozenset({CHAT, EMBEDDING}),
    ),
    # DeepInfra's batch API (https://docs.deepinfra.com/batch/introduction,
    # https://docs.deepinfra.com/batch/batch-endpoints, https://deepinfra.com/blog/batch-api):
    # OpenAI's files + batches under /v1/openai, chat completions and embeddings, "24h" the
    # only window, "billed at 20% below real-time pricing", output and error files kept
    # 2,592,000 s (30 days) by default (``output_expires_after``, not sent).
    # genai-prices has no DeepInfra prices: a job gives them in the price file (MAPLE_PRICES).
    Profile(
        name="deepinfra",
        credentials="deepinfra",
        base_url="https://api.deepinfra.com/v1/openai",
        limits=BATCH_FILE_LIMITS,
        windows=("24h",),
        price_families=("deepinfra",),
        kinds=frozenset({CHAT, EMBEDDING}),
        batch_price_share=0.8,
        results_retention_s=30 * 86_400,
    ),
)


def _class_name(profile: Profile, kind: str) -> str:
    return "".join(part.title() for part in profile.name.split("-")) + kind


def _credentials(profile: Profile, before: str) -> dict[str, Any]:
    """The key and base URL fields of a profile's provider class (its variables, its default
    URL: the prefix before ``before``)."""
    family = profile.credentials.upper()
    return {
        "api_key": (
            str | None,
            Field(
                default=None,
                repr=False,
                description=f"API key (the code location: {family}_API_KEY).",
            ),
        ),
        "base_url": (
            str | None,
            Field(
                default=None,
                description=f"API base URL, the prefix before {before} ({family}_BASE_URL); "
                f"default: {profile.base_url or 'none, it must be given'}.",
            ),
        ),
    }


@functools.cache
def provider_class(profile: Profile) -> type[OpenAIBatchProvider]:
    """The OpenAI batch provider with ``profile``'s capabilities and defaults (one class per
    profile, so the registry, Dagster's resource config and the UI show its own defaults)."""
    cls = create_model(
        _class_name(profile, "BatchProvider"),
        __base__=OpenAIBatchProvider,
        __module__=__name__,
        __doc__=f"{profile.name}: an OpenAI-compatible batch API (files + batches).",
        name=(str, Field(default=profile.name, description="Provider name in costs/output.")),
        **_credentials(profile, "/files and /batches"),
        file_purpose=(str, Field(default=profile.file_purpose, description="Upload purpose.")),
        max_requests=(
            int,
            Field(default=profile.limits.max_requests, description="Requests per batch file."),
        ),
        max_bytes=(int, Field(default=profile.limits.max_bytes, description="Bytes per file.")),
    )
    cls.capabilities = profile.capabilities
    cls.default_base_url = profile.base_url
    return cls


class ProfileRealtimeProvider(OpenAIRealtimeProvider):
    """A profile's real-time twin: OpenAI's chat completions and embeddings at the profile's
    base URL with its key (`realtime_class` makes one class per profile)."""

    profile: ClassVar[Profile]

    def resolved_base_url(self) -> str:
        base_url = self.base_url or self.profile.base_url
        if base_url is None:
            env = self.capabilities.variable("base_url")
            raise ConfigError(
                f"--provider {self.name} needs the API's base URL: give --base-url or set {env} "
                "(the prefix before /chat/completions, e.g. http://127.0.0.1:8787/v1)."
            )
        return base_url.rstrip("/")

    def auth_headers(self) -> dict[str, str]:
        return wire.openai_headers(self.api_key, self.capabilities.variable("api_key"))


@functools.cache
def realtime_class(profile: Profile) -> type[ProfileRealtimeProvider]:
    """The real-time twin of ``profile`` as its own class (its defaults show in the UI)."""
    cls = create_model(
        _class_name(profile, "RealtimeProvider"),
        __base__=ProfileRealtimeProvider,
        __module__=__name__,
        __doc__=f"{profile.realtime_name}: {profile.name}'s chat completions, one row a request.",
        name=(
            str,
            Field(default=profile.realtime_name, description="Provider name in costs/output."),
        ),
        **_credentials(profile, "/chat/completions"),
    )
    cls.profile = profile
    cls.capabilities = profile.twin_capabilities
    return cls
