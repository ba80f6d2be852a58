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

from pydantic import Field, create_model

from maple_engine.model import CHAT, EMBEDDING, Kind
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    MB,
    Dialect,
    ProviderCapabilities,
    ProviderLimits,
)
from maple_engine.providers.openai.batch import OpenAIBatchProvider

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
    batch_discount: float | None = None  # batch price / real-time price (None: 0.5)
    # the APIs its batch lines may go to (``--endpoint``): chat completions, maybe Responses
    endpoints: frozenset[str] = frozenset({"chat"})

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(
            mode="batch",
            limits=self.limits,
            dialect=Dialect.OPENAI,
            price_families=self.price_families,
            orphans="batch-metadata",
            kinds=self.kinds,
            credentials=self.credentials,
            completion_windows=self.windows,
            batch_discount=self.batch_discount,
            endpoints=self.endpoints,
            takes_extra_body=True,
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
    Profile(
        name="groq",
        credentials="groq",
        base_url="https://api.groq.com/openai/v1",
        limits=_100_MB,
        windows=("24h", "48h", "72h", *_DAYS),
        price_families=("groq",),
        batch_discount=0.75,  # Groq: 25% off real-time
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
)


@functools.cache
def provider_class(profile: Profile) -> type[OpenAIBatchProvider]:
    """The OpenAI batch provider with ``profile``'s capabilities and defaults (one class per
    profile, so the registry, Dagster's resource config and the UI show its own defaults)."""
    key = f"{profile.credentials.upper()}_API_KEY"
    where = f"{profile.credentials.upper()}_BASE_URL"
    cls = create_model(
        f"{''.join(part.title() for part in profile.name.split('-'))}BatchProvider",
        __base__=OpenAIBatchProvider,
        __module__=__name__,
        __doc__=f"{profile.name}: an OpenAI-compatible batch API (files + batches).",
        name=(str, Field(default=profile.name, description="Provider name in costs/output.")),
        api_key=(
            str | None,
            Field(default=None, repr=False, description=f"API key (the code location: {key})."),
        ),
        base_url=(
            str | None,
            Field(
                default=None,
                description=f"API base URL, the prefix before /files and /batches ({where}); "
                f"default: {profile.base_url or 'none, it must be given'}.",
            ),
        ),
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
