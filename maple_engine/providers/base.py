"""The provider interface every backend implements, and the typed payloads it exchanges.

A provider has two sides. Its `Wire` is what it is and how its requests and results look, with
no I/O: capabilities, limits, the credential check, a row's request body, the attempt's encoded
bytes. A `Lane` does the I/O: it turns one shard attempt (a frame of ``custom_id`` + encoded
request body) into a provider-side unit of work, reports its state, and returns one result row
per request in the provider-neutral ``RESULT_SCHEMA``. A batch provider class is both; a
real-time provider is a wire that `maple_engine.send.lane.RealtimeLane` sends through. What a
job adds to the calls (headers, extra body, team, the early-start signal) is one
`maple_engine.providers.decorations.CallDecorations` value handed to the provider.

Each provider class describes itself in a `ProviderCapabilities` record: every rule outside the
providers that differs by provider (queues, deadlines, prices, schema subsets, token estimates)
reads that record, never the provider's name or class.
"""

import dataclasses
import enum
import hashlib
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from typing import Any, ClassVar, Literal, Protocol, Self

import orjson
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, BatchState, Kind, Submission
from maple_engine.policy import SendBudget
from maple_engine.providers.attribution import (
    Attribution,
    AttributionMap,
    TeamAttribution,
    given_attribution,
)
from maple_engine.providers.decorations import NO_DECORATIONS, CallDecorations
from maple_engine.providers.file_inputs import FileInputs
from maple_engine.providers.reply_fit import ANY_REPLY, ReplyFit
from maple_engine.providers.rules import NO_RULES, RequestRules

# One row per request of one attempt, whatever the provider.
RESULT_SCHEMA: dict[str, pl.DataType] = {
    "custom_id": pl.String(),
    "status": pl.String(),  # succeeded | failed
    "failure_class": pl.String(),
    "error": pl.String(),
    # May the row be sent again? False: never, whatever its class's retries allow (a resend
    # cannot change the outcome, or would pay for it again); null: its class's retries decide.
    # The error text is for people: no code reads it to decide a resend.
    "resendable": pl.Boolean(),
    "response": pl.String(),
    "billed": pl.Boolean(),
    "input_tokens": pl.Int64(),
    "cached_input_tokens": pl.Int64(),
    "cache_write_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    # Of the output tokens, those the model spent reasoning (billed as output); null where the
    # provider does not report them.
    "reasoning_tokens": pl.Int64(),
    # The reply reported no usage: its tokens were estimated from the row's text (the
    # collection fills them in), as pre-flight estimates them.
    "tokens_estimated": pl.Boolean(),
    "batch_id": pl.String(),
    "sends": pl.Int64(),  # how often the attempt sent the request (null: once; real time retries)
    # The service tier the answer says it was served on (Gemini's ``x-gemini-service-tier``:
    # ``standard`` for a priority request over its limit); null: the tier the attempt asked.
    # A row served at ``standard`` is billed at the standard real-time price.
    "served_tier": pl.String(),
}

#: A column a real-time lane's results may have beside RESULT_SCHEMA's: the sends of the row
#: that a killed run made and never recorded the answer of (billed, then sent again); the
#: attempt's cost entry books them at the usage of the answer that replaced them.
LOST_SENDS = "lost_sends"

MB = 1_000_000

Mode = Literal["batch", "realtime"]
# What caps a provider's batch queue: prompt tokens enqueued per model, requests waiting, nothing.
QueueModel = Literal["enqueued-tokens", "requests", "none"]
# How a batch created just before a crash is found again: by its metadata in the provider's batch
# listing, by labels in its name, by create intents kept under the storage root, or not at all
# (a rerun resumes from the row checkpoints).
OrphanSearch = Literal["batch-metadata", "name-labels", "create-intents", "checkpoints"]


class Dialect(enum.StrEnum):
    """The structured-output API a provider's requests speak (its JSON-schema subset)."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"

    @property
    def label(self) -> str:
        return {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}[self.value]


@dataclasses.dataclass(frozen=True)
class ProviderLimits:
    """Most requests and bytes per batch file (or real-time shard attempt), and the fewest
    requests a batch may hold."""

    max_requests: int
    max_bytes: int
    min_requests: int = 1


# What a batch costs of the real-time price unless a provider's capabilities say otherwise
# (`ProviderCapabilities.batch_price_share`); the ledger prices with the same share.
TYPICAL_BATCH_PRICE_SHARE = 0.5
# The batch APIs' per-file limits (OpenAI's; Gemini and Bedrock take the same request count):
# the providers' defaults and the job's default shard size.
BATCH_FILE_LIMITS = ProviderLimits(max_requests=50_000, max_bytes=200 * MB)


CacheHint = Literal["cache-control", "cache-key", "implicit"]


@dataclasses.dataclass(frozen=True)
class PromptCaching:
    """How a provider caches the shared prefix of its requests (docs/caching.md has the table).

    ``hint``: what ``--cache auto`` adds to each request: ``cache-control`` marks the end of the
    shared prefix (Anthropic), ``cache-key`` names the cache requests share (OpenAI), ``implicit``
    adds nothing (the provider caches any repeated prefix on its own). ``minimum_tokens`` maps a
    fragment of the model name to the shortest prefix the provider caches (first match wins,
    else ``default_minimum``); cached prefixes grow in steps of ``step_tokens``.
    ``write_multiple``: cache writes cost this multiple of the input price (Anthropic's 1-hour
    TTL: 2x) instead of the price source's cache-write rate; ``ttl_s``: how long a written
    prefix stays readable after its last use."""

    hint: CacheHint
    default_minimum: int
    minimum_tokens: tuple[tuple[str, int], ...] = ()
    step_tokens: int = 1
    write_multiple: float | None = None
    ttl_s: int = 300

    def minimum(self, model: str) -> int:
        """The shortest prefix ``model`` caches, in tokens."""
        name = model.lower()
        return next((n for part, n in self.minimum_tokens if part in name), self.default_minimum)

    def cacheable(self, model: str, prefix_tokens: int) -> int:
        """How many of ``prefix_tokens`` shared tokens the provider can read from cache."""
        if prefix_tokens < self.minimum(model):
            return 0
        return prefix_tokens - (prefix_tokens - self.minimum(model)) % self.step_tokens


@dataclasses.dataclass(frozen=True)
class BilledUsage:
    """What a provider's admin reports bill for one UTC day and model (and, grouped by
    account, one project or workspace: None for the default one)."""

    day: date
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    account: str | None = None


class BillingReport(Protocol):
    """Reads a provider's own usage and cost reports with an admin key: base URL (None: the
    provider's), admin key, first and last day (inclusive); ``by_account``: one row per project
    or workspace too (the capabilities' ``attribution``)."""

    def __call__(
        self,
        base_url: str | None,
        admin_key: str,
        first: date,
        last: date,
        *,
        by_account: bool = False,
    ) -> list[BilledUsage]: ...


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """Models whose name holds ``part``: the kind of request they answer and, for embedding
    models, the vector lengths the provider documents for them."""

    part: str
    kind: Kind
    max_dimensions: int | None = None  # the longest vector ``--dimensions`` may ask for
    shortens: bool = True  # False: the model makes one length only and takes no dimensions


@dataclasses.dataclass(frozen=True)
class ProviderCapabilities:
    """What a provider is and what it serves, readable before one is built."""

    mode: Mode
    limits: ProviderLimits
    dialect: Dialect
    price_families: tuple[str, ...]  # genai-prices provider ids, tried in order
    orphans: OrphanSearch
    kinds: frozenset[Kind] = frozenset({CHAT})
    queue: QueueModel = "none"
    realtime_twin: str | None = None  # the provider name a deadline falls back on
    needs_s3_root: bool = False  # the provider itself reads and writes the storage root on S3
    drops_empty_system: bool = False  # an empty system prompt costs no tokens
    price_fallback_model: str | None = None  # prices a model no family knows
    runs_on_emulator: bool = False  # served by the local emulator (``maple`` starts one)
    # Whose API key and base URL settings it takes ("openai": OPENAI_API_KEY, OPENAI_BASE_URL).
    credentials: str | None = None
    # Whose API it speaks where no ``credentials`` say so (Bedrock's AWS chain, the emulator);
    # ``maple providers`` shows it as the name's family.
    family: str | None = None
    takes_role_arn: bool = False  # an IAM role the provider's service assumes (Bedrock)
    # The variables its cloud SDK reads on its own (boto3's AWS chain), for ``maple providers``.
    sdk_env: tuple[str, ...] = ()
    # The account's admin usage and cost reports (``maple reconcile``), read with the
    # ``<CREDENTIALS>_ADMIN_KEY``; every provider with the same credentials bills to them.
    billing_report: BillingReport | None = None
    caching: PromptCaching | None = None  # how it caches a shared prefix; None: it does not
    # Billed at batch prices though it answers in real time (a flex service tier).
    batch_prices: bool = False
    # The batch-priced real-time provider a deadline tries before ``realtime_twin`` (flex).
    flex_twin: str | None = None
    # The faster, dearer real-time provider a deadline turns to after ``realtime_twin`` when
    # standard real time may no longer be in time (a priority service tier).
    priority_twin: str | None = None
    # Input limits in tokens the provider documents where genai-prices knows none:
    # (part of the model name, tokens), the first match wins (an embedding model's input).
    input_limits: tuple[tuple[str, int], ...] = ()
    # The model families the provider documents, the first whose part the model's name holds
    # wins; a model of no listed family is not checked.
    models: tuple[ModelFamily, ...] = ()
    # A server the team runs: no API price (a model the price file does not price costs $0).
    self_hosted: bool = False
    # The APIs a chat job may send to (``--endpoint``): chat completions, maybe Responses.
    endpoints: frozenset[str] = frozenset({"chat"})
    # Name prefixes of the models that take reasoning parameters; empty: not checked.
    reasoning_models: tuple[str, ...] = ()
    # Takes an API version (``api_version``) from ``<CREDENTIALS>_VERSION`` (ANTHROPIC_VERSION).
    takes_api_version: bool = False
    # The ``completion_window`` values its batches accept (``--completion-window``); empty:
    # it takes none (a real-time API, or a batch API without windows).
    completion_windows: tuple[str, ...] = ()
    # Batch price as a share of the real-time price where the price source has no batch rates
    # (None: the usual `TYPICAL_BATCH_PRICE_SHARE`); the discount is 1 minus the share (0.75:
    # 25% off).
    batch_price_share: float | None = None
    # How long the provider keeps a finished batch's results downloadable, in seconds; None:
    # without a documented end (or no batch results: a real-time API).
    results_retention_s: int | None = None
    # The provider whose pushed batch events (webhooks) tell this one's batches ended: the
    # folder `maple webhooks` records them in and the path it serves them at
    # (``/webhooks/<name>``, `maple_engine.storage.batch_events`); None: it pushes none, it is
    # polled.
    webhooks: str | None = None
    # The variables its API key, base URL and API version are read from, where its
    # documentation names others than ``<CREDENTIALS>_API_KEY``, ``<CREDENTIALS>_BASE_URL`` and
    # ``<CREDENTIALS>_VERSION`` (Bedrock's API key: ``AWS_BEARER_TOKEN_BEDROCK``).
    api_key_env: str | None = None
    base_url_env: str | None = None
    version_env: str | None = None
    # What its enqueued-token quota (``queue="enqueued-tokens"``) counts per: a model of the
    # organisation (OpenAI), or one deployment (Azure, where ``--model`` names the deployment).
    # The ledger keys a queue by provider and ``--model``: both are that key.
    queue_scope: Literal["model", "deployment"] = "model"
    # A batch still running at the end of its completion window ends ``expired`` (its unrun
    # rows come back and are sent again); False: the provider keeps running it past the window
    # (the window is a target), so it ends only completed, failed or cancelled.
    windows_expire: bool = True
    # Takes ``--extra-body`` fields on its control calls (the batch create's JSON body and the
    # upload's form), as an OpenAI-compatible gateway may want them.
    takes_extra_body: bool = False
    # The fields of those calls Maple sets itself: ``--extra-body`` may not give them.
    control_fields: frozenset[str] = frozenset()
    # How a team's spend is attributed in its bill (the team attribution map's key it reads):
    # an OpenAI project header, the API key of an Anthropic workspace, Bedrock job tags;
    # None: the API takes none of them (`maple_engine.providers.attribution`).
    attribution: Attribution | None = None
    # What its API refuses in a job's settings (parameters, the response schema's subset),
    # checked before anything is uploaded (`maple_engine.providers.rules`).
    rules: RequestRules = NO_RULES
    # The files it takes beside a prompt (``--file-column``); None: none.
    files: FileInputs | None = None
    # Its batch API takes text only: a row with an image is refused before anything is sent,
    # naming the row and its ``realtime_twin`` (whose API takes images).
    text_only: bool = False

    def variable(self, setting: Literal["api_key", "base_url", "version"]) -> str:
        """The variable ``setting`` is read from (``OPENAI_API_KEY``, ``AZURE_OPENAI_ENDPOINT``)."""
        family = (self.credentials or "maple").upper()
        named = {
            "api_key": self.api_key_env,
            "base_url": self.base_url_env,
            "version": self.version_env,
        }.get(setting)
        suffix = {"api_key": "_API_KEY", "base_url": "_BASE_URL", "version": "_VERSION"}
        return named or f"{family}{suffix[setting]}"

    def check_window(self, name: str, window: str | None) -> None:
        """``window`` (``--completion-window``; None: not given) is one this API accepts."""
        if window is None or window in self.completion_windows:
            return
        if not self.completion_windows:
            raise ConfigError(
                f"--completion-window only applies to batch APIs that take one; {name} takes "
                "none: drop it."
            )
        raise ConfigError(
            f"--completion-window {window!r}: {name} accepts {', '.join(self.completion_windows)}; "
            f"give one of them (default {self.completion_windows[0]})."
        )

    def model_family(self, model: str) -> ModelFamily | None:
        name = model.lower()
        return next((f for f in self.models if f.part in name), None)

    def input_limit(self, model: str) -> int | None:
        """The documented input limit of ``model`` here, None when none is listed."""
        name = model.lower()
        return next((n for part, n in self.input_limits if part in name), None)


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """What every request of a job shares: model, system prompt, parameters, output schema."""

    model: str
    system: str | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    response_schema: dict[str, Any] | None = None
    schema_name: str = "response"
    cache: bool = False  # send the provider's cache hints on the shared prefix (--cache auto)
    cache_key: str | None = None  # names the cache the job's requests share (one per version)
    kind: Kind = CHAT
    dimensions: int | None = None  # an embedding's length; None: the model's own
    endpoint: str = "chat"  # a chat job's API: chat completions, or "responses" (OpenAI's)


@dataclasses.dataclass(frozen=True)
class ShardPayload:
    """One attempt of one shard: the requests to send and the labels to send them with."""

    job: str
    shard: str
    attempt: int
    model: str
    requests: pl.DataFrame  # custom_id, request (encoded JSON body)
    budget: SendBudget | None = None  # what a real-time attempt may spend on each row's sends
    #: Has the job stopped (``maple cancel``)? A real-time attempt then sends nothing more.
    stopped: Callable[[], bool] | None = None
    #: The job's ``--priority``: a batch API that orders its own queue by one (Gemini's
    #: ``batch.priority``) gets it with the batch.
    priority: int = 0
    #: What the job's replies must be: a real-time attempt stops at the first that never can
    #: (`maple_engine.providers.reply_fit`; `maple_engine.errors.ReplyMismatch`).
    fit: ReplyFit = ANY_REPLY
    _encoded: tuple[bytes, str] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def encoded(self, encode: Callable[[pl.DataFrame], bytes]) -> tuple[bytes, str]:
        """``(encode(requests), its content hash)``, computed once per payload: the check for
        an orphaned batch and the upload share the bytes instead of encoding twice."""
        if self._encoded is None:
            data = encode(self.requests)
            object.__setattr__(self, "_encoded", (data, content_hash([data])))
        assert self._encoded is not None
        return self._encoded

    def submission(
        self, provider: str, batch_id: str, content_hash: str, file_id: str | None = None
    ) -> "Submission":
        """The record of this attempt, submitted now as ``batch_id``."""
        return Submission(
            provider=provider,
            job=self.job,
            shard=self.shard,
            attempt=self.attempt,
            batch_id=batch_id,
            request_count=self.requests.height,
            content_hash=content_hash,
            submitted_at=now_iso(),
            file_id=file_id,
        )

    def metadata(self, content_hash: str) -> dict[str, str]:
        return {
            "maple_job": self.job,
            "maple_shard": self.shard,
            "maple_attempt": str(self.attempt),
            "maple_hash": content_hash,
        }


class ProviderModel(BaseModel):
    """Base of every provider class: its settings are immutable pydantic fields with
    descriptions, so the same class is configured in code, from the CLI, or (wrapped by
    ``resources.providers``) as a Dagster resource whose config the UI shows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    capabilities: ClassVar[ProviderCapabilities]
    # The job's headers, extra control-call fields and team (`decorated`): not settings, so
    # never in a resource's config, a repr or a dump.
    _decorations: CallDecorations = PrivateAttr(default=NO_DECORATIONS)

    team_attribution: str | None = Field(
        default=None,
        description="The team attribution map: a JSON file's path (MAPLE_TEAM_ATTRIBUTION) or "
        "its JSON text: which OpenAI project, Anthropic workspace, Bedrock tags and Gemini "
        "labels each team's jobs go to.",
    )

    @property
    def mode(self) -> str:
        """``batch`` (a provider batch API) or ``realtime`` (one call per row)."""
        return self.capabilities.mode

    @property
    def extra_headers(self) -> dict[str, str]:
        """The headers sent on every request besides the provider's own (a gateway's, and
        the team's ``OpenAI-Project`` where the API takes one)."""
        return self._decorations.headers_for(self.capabilities.attribution)

    def attribution_map(self) -> AttributionMap:
        """The configured team attribution map (`EMPTY` when none is)."""
        return given_attribution(self.team_attribution)

    @property
    def team(self) -> TeamAttribution:
        """The accounts of the team this provider sends for (`decorated`)."""
        return self._decorations.team

    @property
    def extra_body(self) -> dict[str, Any]:
        """The fields added to the JSON body of every control call and to the upload's form
        (a gateway's, ``--extra-body``)."""
        return dict(self._decorations.extra_body)

    @property
    def decorations(self) -> CallDecorations:
        """What the job adds to this provider's calls (`decorated`)."""
        return self._decorations

    @property
    def wire(self) -> Self:
        """What the provider is and how it encodes: the provider itself (a batch provider is
        its own `Wire` and `Lane`)."""
        return self

    def decorated(self, decorations: CallDecorations) -> Self:
        """This provider making its calls with ``decorations`` (itself if it already does; a
        copy opens its own connections). ``decorations`` are checked where they are built
        (`maple_engine.providers.decorations.decorations_for`)."""
        if decorations == self._decorations and decorations.sending is self._decorations.sending:
            return self
        copy = self._fresh_copy()
        copy._decorations = decorations
        return copy

    def settle_schema_format(self, schema: dict[str, Any]) -> Self:
        """This provider with the structured-output form its server takes for ``schema`` (a
        server the team runs probes it, `ProviderCapabilities.self_hosted`); any other
        provider takes its API's one form: itself."""
        return self

    def _fresh_copy(self) -> Self:
        """A copy that opens its own connections."""
        copy = self.model_copy()
        private = copy.__pydantic_private__ or {}
        if "_http" in private:  # a batch provider's kept client: the copy makes its own
            private["_http"] = None
        return copy

    def twin_settings(self) -> dict[str, Any]:
        """The settings a twin on the same API takes (a deadline's real-time fallback, its flex
        tier): this provider's base URL and key, where it has them."""
        fields = type(self).model_fields
        names = ("base_url", "api_key", "api_version", "team_attribution")
        return {name: getattr(self, name) for name in names if name in fields}


class Wire(Protocol):
    """What a provider is and how its requests and results look, without I/O: its
    capabilities and limits, the credential check, the request body of a row, a line's size and
    the attempt's encoded bytes (`ProviderModel` classes)."""

    @property
    def capabilities(self) -> ProviderCapabilities: ...

    @property
    def provider_name(self) -> str: ...

    @property
    def mode(self) -> str:
        """``batch`` (a provider batch API) or ``realtime`` (one call per row)."""
        ...

    def check_credentials(self) -> None:
        """Raise `ConfigError` naming the missing setting if the provider cannot authenticate."""
        ...

    def limits(self) -> ProviderLimits: ...

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The attempt's requests as the provider receives them (its content hash)."""
        ...

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        """Each row's encoded request body: ``user`` the rendered prompt, ``image`` an image
        URL, ``files`` the row's encoded file parts (`FileInputs.part`), each after a comma."""
        ...

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr: ...

    def twin_settings(self) -> dict[str, Any]:
        """The base URL and key a twin on the same API is built with (a deadline's fallback)."""
        ...


class Lane(Protocol):
    """How a job's attempts reach a provider and come back: a provider batch API (a batch
    `ProviderModel` class is its own lane) or a real-time API run as batches
    (`maple_engine.send.lane.RealtimeLane`). ``wire`` is the provider it sends to."""

    @property
    def wire(self) -> Wire: ...

    def submit(self, payload: ShardPayload) -> Submission: ...

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]: ...

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame: ...

    def cancel(self, submission: Submission) -> None: ...

    def find_orphans(self, job: str) -> list[Submission]: ...

    def close(self) -> None:
        """Release connections (the provider opens them again if used later)."""
        ...

    def check_endpoint(self) -> None:
        """One cheap call before anything is uploaded: `ConfigError` naming the URL and the fix
        when the endpoint is unreachable, refuses the key, or is not the provider's API."""
        ...


class BatchProvider(Wire, Lane, Protocol):
    """A provider class the registry builds for a batch API: its own wire and lane, the job's
    decorations on it."""

    def attribution_map(self) -> AttributionMap:
        """The configured team attribution map (what a job's ``--team`` is looked up in)."""
        ...

    def decorated(self, decorations: CallDecorations) -> Self:
        """This provider making its calls with a job's ``decorations``."""
        ...

    def settle_schema_format(self, schema: dict[str, Any]) -> Self:
        """This provider with the structured-output form its server takes for ``schema``."""
        ...


def poll_batches(
    wanted: set[str],
    listing: Callable[[], Iterable[dict[str, Any]]],
    fetch: Callable[[str], dict[str, Any]],
    state_of: Callable[[dict[str, Any]], BatchState],
) -> dict[str, BatchState]:
    """States of the ``wanted`` batches: one paged list call covers many (one call per sensor
    tick, not one per shard); batches the listing did not reach are fetched one by one."""
    states: dict[str, BatchState] = {}
    if len(wanted) > 3:
        for batch in listing():
            if batch["id"] in wanted:
                states[batch["id"]] = state_of(batch)
            if len(states) == len(wanted):
                break
    for batch_id in sorted(wanted - states.keys()):
        states[batch_id] = state_of(fetch(batch_id))
    return states


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def content_hash(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()[:32]


def json_literal(value: Any) -> str:
    return orjson.dumps(value).decode()


def result_frame(rows: dict[str, list[Any]]) -> pl.DataFrame:
    """Build a RESULT_SCHEMA frame from column lists (missing columns become nulls)."""
    height = len(rows.get("custom_id", []))
    columns = {
        name: pl.Series(name, rows.get(name, [None] * height), dtype=dtype)
        for name, dtype in RESULT_SCHEMA.items()
    }
    return pl.DataFrame(columns)


def rows_frame(rows: list[dict[str, Any]], batch_id: str) -> pl.DataFrame:
    """A RESULT_SCHEMA frame from parsed result rows of one batch."""
    columns = {key: [row.get(key) for row in rows] for key in RESULT_SCHEMA if key != "batch_id"}
    return result_frame({**columns, "batch_id": [batch_id] * len(rows)})


def failed_row(
    custom_id: Any, failure_class: str, message: str, *, resendable: bool | None = None
) -> dict[str, Any]:
    """A result row for a request that failed unbilled; ``resendable=False`` if it may never
    be sent again (``RESULT_SCHEMA``)."""
    return {
        "custom_id": custom_id,
        "status": "failed",
        "failure_class": failure_class,
        "error": message,
        "resendable": resendable,
        "billed": False,
    }


def json_string_expr(value: pl.Expr) -> pl.Expr:
    """JSON-encode a string column (quotes and escapes) without per-row Python."""
    return pl.struct(v=value).struct.json_encode().str.slice(5).str.head(-1)


def user_content_expr(
    user: pl.Expr,
    image: pl.Expr | None,
    image_part: str,
    text_part: str = "text",
    files: pl.Expr | None = None,
) -> pl.Expr:
    """Encoded content of the user message: a string, or text plus an image part and the
    row's file parts.

    ``image_part`` is the provider's image block with ``{url}`` standing for the encoded URL,
    ``text_part`` the type of its text block; ``files`` the row's file parts, encoded, each
    preceded by a comma ("" for none: `maple_engine.inputs.files`).
    """
    text = json_string_expr(user)
    if image is None and files is None:
        return text
    pieces = [pl.lit('[{"type":' + json_literal(text_part) + ',"text":'), text, pl.lit("}")]
    if image is not None:
        before, after = image_part.split("{url}")
        pieces += [pl.lit("," + before), json_string_expr(image), pl.lit(after)]
    if files is not None:
        pieces.append(files)
    return pl.concat_str([*pieces, pl.lit("]")])


def splice_params(encoded: pl.Expr, params: dict[str, Any]) -> pl.Expr:
    """Append constant JSON members to an encoded JSON object expression."""
    if not params:
        return encoded
    tail = json_literal(params)[1:]  # drop "{": the members and the closing brace
    return pl.concat_str([encoded.str.head(-1), pl.lit("," + tail)])
