"""The records every stage of the engine shares: column names, request kinds (``KINDS``), shards,
versions, submissions and batch states, and the kinds of stop. They sit on the engine's ground
floor (they import nothing of it), so a stage reads them without reaching into the stage that
writes them."""

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

# -- columns ----------------------------------------------------------------------------------
# The engine's own columns in shard and plan files (never in the output), then the output's.
ROW_ID = "_maple_row_id"
CUSTOM_ID = "_maple_custom_id"
REQUEST = "_maple_request"
KEY = "_maple_key"  # the request key (maple_engine.storage.response_store)
FILE_TOKENS = "_maple_file_tokens"  # the prompt tokens of a row's files (maple_engine.inputs.files)
INTERNAL_COLUMNS = (ROW_ID, CUSTOM_ID, REQUEST, KEY, FILE_TOKENS)

OUTPUT_COLUMNS = (
    "llm_response",
    "llm_parsed",
    "llm_status",
    "llm_failure_class",
    "llm_error",
    "llm_attempts",
    "llm_input_tokens",
    "llm_output_tokens",
    "llm_cached_tokens",
    "llm_cache_write_tokens",
    "llm_reasoning_tokens",
    "llm_tokens_estimated",
    "llm_cost_usd",
    "llm_model",
    "llm_batch_id",
    "llm_reused",
    "llm_embedding",
)
EMBEDDING_COLUMN = "llm_embedding"

# The API a chat job's requests go to: chat completions, or OpenAI's Responses API.
ENDPOINTS = ("chat", "responses")

# The column of a shard's filled rows that says the answer came from the response store.
REUSED = "reused"


# -- request kinds ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Kind:
    """What one job's requests ask for, one per row: what the kind needs of a template, which
    output column it fills, which job options only it takes, and how its rows are sent, counted
    and merged where that differs. A new kind is one record in ``KINDS`` plus the support of
    the providers that serve it (``ProviderCapabilities.kinds``, their request bodies)."""

    name: str  # as stored in a job's spec.json and shown to users
    job: str  # how a message names a job of this kind
    command: str  # the ``maple`` command that runs a job of this kind
    template_field: str  # the job option holding the template rendered per row
    options: tuple[str, ...]  # the job options only this kind takes (its template among them)
    output_column: str  # the output column its answers fill
    answer: Literal["text", "vector"]  # a reply's text, or a float32 vector (base64 on the wire)
    replies: bool  # the model writes a reply: output tokens, the template sent as a chat message
    sent: str  # what one row sends, as a message names it
    skips_empty: bool  # a row whose template renders empty is not sent (``empty_text``)
    output_formats: tuple[str, ...]  # the output files that can hold its answers
    output_name: str  # the default output beside the input (``maple enrich``): stem, ext
    collect_parallelism: int  # shards whose result files are downloaded and parsed at once
    fingerprinted: bool  # its name and options are in the fingerprint (chat's never were)

    def __str__(self) -> str:
        return self.name


CHAT = Kind(
    name="chat",
    job="a chat job",
    command="enrich",
    template_field="prompt",
    options=(
        "prompt",
        "system",
        "response_schema",
        "image_column",
        "file_columns",
        "check_images",
        "cache",
        "endpoint",
        "distill",
        "distill_embedding_model",
        "distill_provider",
        "distill_dimensions",
        "distill_sample",
        "distill_agreement",
    ),
    output_column="llm_response",
    answer="text",
    replies=True,
    sent="request",
    skips_empty=False,
    output_formats=("parquet", "csv"),
    output_name="{stem}_enriched.{ext}",
    collect_parallelism=2,  # memory: that many shards
    fingerprinted=False,  # a chat job's fingerprint stays what it was before kinds
)
EMBEDDING = Kind(
    name="embedding",
    job="an embedding job",
    command="embed",
    template_field="text",
    options=("text", "dimensions"),
    output_column=EMBEDDING_COLUMN,
    answer="vector",
    replies=False,
    sent="text to embed",
    skips_empty=True,
    output_formats=("parquet",),  # a fixed-size float32 list per row: CSV cannot hold it
    output_name="{stem}_embedded.parquet",
    # Result files are mostly vectors (about 80 MB per 50,000-line shard at 256 dimensions,
    # parsed whole): one shard at a time, so memory holds one of them.
    collect_parallelism=1,
    fingerprinted=True,
)
KINDS: Mapping[str, Kind] = MappingProxyType({kind.name: kind for kind in (CHAT, EMBEDDING)})


def kind_named(name: "str | Kind") -> Kind:
    """The kind called ``name`` (a kind is itself)."""
    if isinstance(name, Kind):
        return name
    if name not in KINDS:
        raise ValueError(f"kind {name!r} is not one of {', '.join(KINDS)}")
    return KINDS[name]


# -- shards and versions ----------------------------------------------------------------------
def shard_key(index: int) -> str:
    """Partition key of the shard at ``index`` (sortable, stable)."""
    return f"s{index:05d}"


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One shard file of a version: its key, rows, bytes and the row ids it spans."""

    key: str
    rows: int
    bytes: int
    first_row: int
    last_row: int


@dataclasses.dataclass(frozen=True)
class Version:
    """One version of a living enrichment: what it was made from, and when."""

    number: int
    fingerprint: str
    input_digest: str
    reuse: bool = True
    retry_failed: bool = False
    created_at: float = 0.0

    def same_run(self, other: "Version") -> bool:
        """True if ``other`` asks for exactly the requests of this version (a resume)."""
        return (self.fingerprint, self.input_digest, self.reuse, self.retry_failed) == (
            other.fingerprint,
            other.input_digest,
            other.reuse,
            other.retry_failed,
        )

    def shard_key(self, index: int) -> str:
        key = shard_key(index)
        return key if self.number == 1 else f"v{self.number}-{key}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- submissions and batches ------------------------------------------------------------------
# Batch ids of real-time attempts (``rt-<job>-<shard>-<attempt>``), of those billed at batch
# prices (a flex tier: ``rt-flex-...``), and of those on a priority tier (``rt-prio-...``).
#: The canary's label in place of a shard key: its checkpoints, cost ledger entries, budget
#: admissions and response store files (`maple_engine.canary`)
CANARY_SHARD = "canary"
REALTIME_PREFIX = "rt-"
BATCH_PRICED_PREFIX = "rt-flex-"
PRIORITY_PREFIX = "rt-prio-"


def batch_priced(batch_id: str) -> bool:
    """Whether the attempt ``batch_id`` is billed at batch prices: a batch, or a flex attempt."""
    return not batch_id.startswith(REALTIME_PREFIX) or batch_id.startswith(BATCH_PRICED_PREFIX)


def is_realtime(submission: "Submission") -> bool:
    """Whether ``submission`` went through a real-time API (its id is not a provider batch's)."""
    return submission.batch_id.startswith(REALTIME_PREFIX)


def priority_priced(batch_id: str) -> bool:
    """Whether the attempt ``batch_id`` went through a priority tier (billed at its price)."""
    return batch_id.startswith(PRIORITY_PREFIX)


def is_priority(submission: "Submission") -> bool:
    """Whether ``submission`` went through a priority tier (faster real time, dearer)."""
    return priority_priced(submission.batch_id)


def is_flex(submission: "Submission") -> bool:
    """Whether ``submission`` went through a flex tier (real-time answers at batch prices)."""
    return submission.batch_id.startswith(BATCH_PRICED_PREFIX)


# "lost": a batch the provider no longer knows (maple_engine.providers.lost).
ENDED_STATES = frozenset({"completed", "failed", "expired", "cancelled", "ended", "lost"})


@dataclasses.dataclass(frozen=True)
class Submission:
    """The durable record of one submitted shard attempt."""

    provider: str
    job: str
    shard: str
    attempt: int
    batch_id: str
    request_count: int
    content_hash: str
    submitted_at: str
    file_id: str | None = None
    adopted: bool = False
    #: a real-time attempt resumed after a crash: the batch ids of the rows an earlier run of
    #: it answered (kept in its checkpoints), which this submission carries but did not send
    carried: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Submission":
        fields = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in fields}
        known["carried"] = tuple(known.get("carried", ()))
        return cls(**known)


@dataclasses.dataclass(frozen=True)
class BatchState:
    """Where a submitted batch stands, as the provider reports it."""

    batch_id: str
    status: str
    ended: bool
    errors: tuple[str, ...] = ()
    error_codes: tuple[str, ...] = ()
    completed: int = 0
    failed: int = 0
    total: int = 0
    #: the provider's own times (unix seconds) of the phases it reports: ``created``,
    #: ``validating``, ``in_progress``, ``finalizing``, ``ended`` (the batch history reads them)
    times: tuple[tuple[str, float], ...] = ()
    #: where an ended batch's results are, as the poll saw them: (field, reference) pairs such
    #: as OpenAI's ``output_file_id`` and ``error_file_id`` or Anthropic's ``results_url``, so
    #: the download that follows the poll need not fetch the batch again (empty: fetch it)
    results_at: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class LineTally:
    """How a batch's result lines matched the requests it was sent, beyond one line each
    (`maple_engine.collect.accounting`); a shard's summary adds up its attempts'."""

    missing: int = 0  # requests with no line in a batch that ran every request
    duplicated: int = 0  # lines beyond the first for a request
    unknown: int = 0  # lines whose custom id the batch was not sent

    def figures(self) -> dict[str, int]:
        """As named figures: ``lines_missing``, ``lines_duplicated``, ``lines_unknown``."""
        return {
            "lines_missing": self.missing,
            "lines_duplicated": self.duplicated,
            "lines_unknown": self.unknown,
        }

    def plus(self, other: "LineTally") -> "LineTally":
        return LineTally(
            self.missing + other.missing,
            self.duplicated + other.duplicated,
            self.unknown + other.unknown,
        )


# -- stops ------------------------------------------------------------------------------------
class StopKind(enum.StrEnum):
    """Why a job stopped sending (the ``kind`` of its stop record; a rerun reads it)."""

    STOP = "stop"  # stopped for a reason of its own (the reason says which)
    AGE = "age"  # the job's max age passed
    QUOTA = "quota"  # the provider reports insufficient quota
    BUDGET = "budget"  # the next attempt would pass the budget
    CANCEL = "cancel"  # `maple cancel`
    QUEUE = "queue"  # the provider's queue cannot take the job's shards
    REPLY = "reply"  # a reply could not fit the job (a vector of another length)
