"""Real-time providers' shared core: the settings and wire hooks every real-time API has (each
provider's wire format is its own folder's ``realtime.py``).

A real-time provider describes one synchronous API: where to send (``resolved_base_url``,
``endpoint``, ``auth_headers``), how its rows become requests (``requests_of``) and its answers
rows (``parse_group``), how it classifies a failed answer (``classify``), which rate-limit headers
it sends (``read_limits``) and how long it asks a client to wait (``retry_wait``). Sending is not
its business: `maple_engine.send.lane.RealtimeLane` runs a shard attempt over it (pacing,
adaptive concurrency, retries, row checkpoints) and gives the job the batch interface.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field

from maple_engine.durations import seconds_until
from maple_engine.model import CHAT, REALTIME_PREFIX, Kind
from maple_engine.providers.attribution import Attribution
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    Dialect,
    ModelFamily,
    PromptCaching,
    ProviderCapabilities,
    ProviderLimits,
    ProviderModel,
    RequestSpec,
)
from maple_engine.providers.file_inputs import FileInputs
from maple_engine.providers.http import make_client, retry_after_seconds
from maple_engine.providers.rules import NO_RULES, RequestRules
from maple_engine.settings import DEFAULT_STORAGE

Row = dict[str, Any]
Group = tuple[tuple[str, ...], str]  # the custom ids of the rows one request carries, its body
SHARD = ProviderLimits(max_requests=10_000, max_bytes=BATCH_FILE_LIMITS.max_bytes)


def realtime_capabilities(
    dialect: Dialect,
    price_family: str,
    credentials: str,
    *,
    drops_empty_system: bool = False,
    caching: PromptCaching | None = None,
    kinds: frozenset[Kind] = frozenset({CHAT}),
    models: tuple[ModelFamily, ...] = (),
    self_hosted: bool = False,
    endpoints: frozenset[str] = frozenset({"chat"}),
    reasoning_models: tuple[str, ...] = (),
    base_url_env: str | None = None,
    version_env: str | None = None,
    takes_api_version: bool = False,
    attribution: Attribution | None = None,
    rules: RequestRules = NO_RULES,
    files: FileInputs | None = None,
) -> ProviderCapabilities:
    """What every real-time provider shares: shard attempts run at once, nothing queues, and a
    rerun resumes from the row checkpoints (no orphans)."""
    return ProviderCapabilities(
        mode="realtime",
        limits=SHARD,
        dialect=dialect,
        price_families=(price_family,),
        queue="none",
        orphans="checkpoints",
        drops_empty_system=drops_empty_system,
        credentials=credentials,
        caching=caching,
        kinds=kinds,
        models=models,
        self_hosted=self_hosted,
        endpoints=endpoints,
        reasoning_models=reasoning_models,
        base_url_env=base_url_env,
        version_env=version_env,
        takes_api_version=takes_api_version,
        files=files,
        attribution=attribution,
        rules=rules,
    )


@dataclasses.dataclass(frozen=True)
class RateLimits:
    """What one answer said about the account's limits (None: not sent)."""

    rpm: int | None = None
    tpm: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests: float | None = None
    reset_tokens: float | None = None


#: (limit, remaining, reset) header names for requests, then for tokens
LimitHeaders = tuple[str, str, str, str, str, str]


def read_limit_headers(
    headers: Mapping[str, str], names: LimitHeaders, now_epoch: float
) -> RateLimits:
    """The limits an answer's ``headers`` report under a provider's header ``names``; resets
    may be durations or RFC 3339 moments."""
    rpm, left_requests, reset_requests, tpm, left_tokens, reset_tokens = map(headers.get, names)
    return RateLimits(
        rpm=_int(rpm),
        tpm=_int(tpm),
        remaining_requests=_int(left_requests),
        remaining_tokens=_int(left_tokens),
        reset_requests=seconds_until(reset_requests, now_epoch),
        reset_tokens=seconds_until(reset_tokens, now_epoch),
    )


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


def on_tier(rows: list[tuple[str, str]], field: str, tier: str) -> list[tuple[str, str]]:
    """``rows`` with ``field: tier`` in every body: a flex provider also sends bodies encoded
    for another lane (a deadline's or a stalled batch's rows), and the provider bills
    the flex tier's prices only to requests that ask for it."""
    marked = f'"{field}":"{tier}"'
    return [(custom_id, _with(body, field, tier, marked)) for custom_id, body in rows]


def off_tier(body: str, field: str) -> str:
    """``body`` without its ``field`` (a service tier): the request at the standard tier."""
    held = orjson.loads(body)
    held.pop(field, None)
    return orjson.dumps(held).decode()


def _with(body: str, field: str, tier: str, marked: str) -> str:
    if marked in body:  # encoded by the flex provider itself
        return body
    return orjson.dumps({**orjson.loads(body), field: tier}).decode()


class RealtimeProvider(ProviderModel):
    """Shared core of the real-time providers (subclasses set the wire format)."""

    name: str = Field(default="realtime", description="Provider name recorded in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (code location: an EnvVar)."
    )
    base_url: str | None = Field(default=None, description="API base URL; default: the API's.")
    checkpoint_root: str = Field(
        default=DEFAULT_STORAGE,
        description="Storage root for row checkpoints: the job's root.",
    )
    rate_share_db: str | None = Field(
        default=None,
        repr=False,
        description="Database where runs on every host share the account's rate limit: the "
        "ledger's URL (an EnvVar: it holds a password); None: heartbeats under checkpoint_root.",
    )
    rpm: int | None = Field(default=None, description="Requests per minute; None: learn it.")
    tpm: int | None = Field(default=None, description="Tokens per minute; None: learn it.")
    max_concurrency: int = Field(default=64, description="Most requests in flight at once.")
    initial_concurrency: int = Field(
        default=4, description="Requests in flight before any rate-limit header has been seen."
    )
    max_attempts: int = Field(
        default=6, description="Sends per request within one attempt (429/5xx/timeouts)."
    )
    timeout_s: float = Field(default=120.0, description="HTTP timeout per request, seconds.")
    checkpoint_rows: int = Field(
        default=200,
        description="Rows per checkpoint chunk (a local root, logging each row: 5000 at least).",
    )
    checkpoint_seconds: float = Field(
        default=2.0,
        description="Seconds between chunk writes (a local root, logging each row: 30 at least).",
    )
    max_requests: int = Field(default=SHARD.max_requests, description="Requests per shard.")
    max_bytes: int = Field(default=SHARD.max_bytes, description="Encoded bytes per shard.")

    batch_id_prefix: ClassVar[str] = REALTIME_PREFIX

    # -- wire format (subclasses) -----------------------------------------------------------
    def endpoint(self) -> str:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def request_headers(self) -> dict[str, str]:
        """What every request carries: the key's headers, then the job's extra ones."""
        return self.auth_headers() | self.extra_headers

    def resolved_base_url(self) -> str:
        raise NotImplementedError

    def url_of(self, path: str) -> str:
        """The URL of a request to the API path ``path`` (one with a query appends it)."""
        return self.resolved_base_url().rstrip("/") + path

    def control_client(self) -> httpx.Client:
        """A client for the API's control calls (a file upload), outside the sending lane."""
        return make_client(self.resolved_base_url(), self.request_headers(), self.timeout_s)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        raise NotImplementedError

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        raise NotImplementedError

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """One request per row, to ``endpoint()`` (a provider may group rows instead)."""
        return self.endpoint(), [((custom_id,), body) for custom_id, body in rows]

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        return [self.parse_body(custom_ids[0], body)]

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        raise NotImplementedError

    # -- the provider interface -------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        return self.name

    def limits(self) -> ProviderLimits:
        return ProviderLimits(self.max_requests, self.max_bytes)

    def check_credentials(self) -> None:
        self.auth_headers()

    def close(self) -> None:
        """Nothing kept open: each attempt opens and closes its own connections."""

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return request.str.len_bytes()

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The attempt's request bodies, one a line (what its content hash is taken over)."""
        return ("\n".join(requests["request"].to_list()) + "\n").encode()

    def bound_to(self, model: str) -> "RealtimeProvider":
        """The provider that sends ``model``'s requests (a provider whose URL names the model
        returns a copy bound to it)."""
        return self

    def read_limits(self, headers: Mapping[str, str], now_epoch: float) -> RateLimits:
        """The rate limits and resets the answer's headers report (none by default)."""
        return RateLimits()

    def forbidden_row(self, response: httpx.Response) -> tuple[str, str] | None:
        """The failure class and message of a 401 or 403 that blames the row, not the key (a
        file the row names that the provider no longer holds); None: the key's, which stops
        the job."""
        return None

    def retry_wait(self, response: httpx.Response) -> float | None:
        """How long the server asks a client to wait before sending again, in seconds."""
        return retry_after_seconds(response)

    def shed_fallback(self, body: str) -> str | None:
        """The request ``body`` in the next lane, where this provider's tier may shed it (a
        429 of capacity: flex) and the same API serves it at the standard tier; None: no next
        lane here (the row's retries decide)."""
        return None

    def served_tier(self, headers: Mapping[str, str]) -> str | None:
        """The service tier an answer says it was served on, where the API says (Gemini's
        ``x-gemini-service-tier``); None: the tier asked for."""
        return None

    def check_endpoint(self) -> None:
        """Nothing here: the first request's answer tells (a dead endpoint fails its rows)."""
