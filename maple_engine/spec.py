"""The definition of one job (an enrichment or an embedding), and the checks it must pass
before anything is sent.

A ``JobSpec`` is built once, from the values each entry point has (``maple enrich``'s flags,
``enrichment()``'s keywords, ``maple_assets.enrich``'s, ``maple_job``'s run config): its
validators read them as given (a duration, ``NAME=VALUE`` parameters, a schema as a file or a
pydantic model) and check every bound there."""

import hashlib
import math
import os
import threading
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from maple_engine.durations import parse_duration
from maple_engine.errors import ConfigError
from maple_engine.label_field import label_field
from maple_engine.model import CHAT, INTERNAL_COLUMNS, KINDS, OUTPUT_COLUMNS, Kind, kind_named
from maple_engine.policy import UNLIMITED, check_retries, parse_retry_options
from maple_engine.providers.attribution import AttributionMap
from maple_engine.providers.base import BATCH_FILE_LIMITS
from maple_engine.providers.decorations import CallDecorations, decorations_for
from maple_engine.providers.extra_body import parse_extra_body
from maple_engine.providers.headers import parse_headers
from maple_engine.providers.registry import DEFAULT_PROVIDER
from maple_engine.storage.storage import is_remote

# A job's kind: given and stored by its name ("chat", "embedding"), held as its record.
KindField = Annotated[
    Kind,
    PlainValidator(kind_named),
    PlainSerializer(lambda kind: kind.name, return_type=str),
    WithJsonSchema({"type": "string", "enum": list(KINDS)}),
]

MAX_JOB_NAME = 100  # bytes: a file name component on every store, with room for suffixes

# The other names of four job options, kept for compatibility; ``JobSpec`` takes either. The
# command line spells these options by them (``--job``, ``--budget``, ``--deadline``), the Python
# API takes them as keywords (``job=``, ``input=``, ``budget=``, ``deadline=``; ``enrichment()``
# ``deadline=``), and ``maple_job``'s config names the job and its input by them.
ALIASES = {"name": "job", "source": "input", "budget_usd": "budget", "deadline_s": "deadline"}


def _or_alias(field: str) -> AliasChoices:
    return AliasChoices(field, ALIASES[field])


class JobSpec(BaseModel):
    """Every option of a job, each with its default, bounds and help, written once here.

    The ``maple enrich`` options are generated from these fields and ``enrichment()`` takes them
    as keywords (a test holds both to this model). The fields in ``fingerprint`` decide what is
    sent; a rerun of the same job must agree on them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        validation_alias=_or_alias("name"),
        description="Job name; rerun with the same name to resume.",
    )
    kind: KindField = Field(
        default=CHAT,
        json_schema_extra={"default": CHAT.name},
        description="What each row's request asks for: a reply (chat) or a vector (embedding).",
    )
    prompt: str | None = Field(
        default=None,
        description="Prompt template with {column} placeholders ({column:json} for list/struct "
        "columns, {{ }} for braces).",
    )
    text: str | None = Field(
        default=None,
        description="Template of the text to embed, with {column} placeholders as in --prompt.",
    )
    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="Length of each vector (models that can shorten theirs); default: the model's.",
    )
    model: str = Field(description="Model name, e.g. gpt-4o-mini.")

    @model_validator(mode="after")
    def _template_fits_the_kind(self) -> "JobSpec":
        """A job has its kind's template (a chat job a prompt, an embedding a text), and none
        of the other kinds' options; a blank template (an unset shell variable, say) would be
        sent, and paid, per row."""
        kind, field = self.kind, self.kind.template_field
        if getattr(self, field) is None:
            raise ValueError(f"{kind.job} needs a {field} template")
        if not str(getattr(self, field)).strip():
            raise ValueError(
                f"the {field} template is empty (an unset shell variable?): give it text and "
                "{column} placeholders"
            )
        other = [f for f in foreign_options(kind) if getattr(self, f) != _default(f)]
        if other:
            raise ValueError(f"{', '.join(other)} do(es) not apply to {kind.job}")
        return self

    @property
    def template(self) -> str:
        """The template rendered per row: the prompt, or the text to embed (the kind's)."""
        return str(getattr(self, self.kind.template_field))

    provider: str = Field(default=DEFAULT_PROVIDER, description="Provider that runs the requests.")
    team: str = Field(default="default", description="Team the cost is booked to.")
    system: str | None = Field(default=None, description="System prompt.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Model parameter NAME=VALUE (JSON value), repeatable."
    )
    source: str | None = Field(
        default=None,
        validation_alias=_or_alias("source"),
        description="Input table: a CSV or Parquet path or URI.",
    )
    output: str | None = Field(
        default=None, description="Output path (.parquet or .csv); default INPUT_enriched.EXT."
    )
    max_requests_per_batch: int = Field(
        default=BATCH_FILE_LIMITS.max_requests,
        ge=1,
        description="Most requests in one batch (the provider's file limit by default).",
    )
    max_batch_bytes: int = Field(
        default=BATCH_FILE_LIMITS.max_bytes,
        ge=1,
        description="Most bytes in one batch file (the provider's file limit by default).",
    )
    response_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON schema file: replies are validated and parsed into llm_parsed.",
    )
    image_column: str | None = Field(
        default=None, description="Column holding an image URL sent with each prompt."
    )
    file_columns: list[str] = Field(
        default_factory=list,
        description="Column whose cells are files sent with each prompt (a local path, s3:// "
        "key or http(s) URL of a PDF, PNG/JPEG/WebP/GIF image, or WAV/MP3 recording), "
        "repeatable.",
    )
    retries: dict[str, int] = Field(
        default_factory=dict, description="Retry policy override CLASS=N|unlimited."
    )
    check_images: bool = Field(
        default=True,
        description="Check image and file URLs before retrying invalid_image or invalid_file "
        "(--no-image-check: retry without checking).",
    )
    budget_usd: float | None = Field(
        default=None,
        ge=0,
        validation_alias=_or_alias("budget_usd"),
        description="Stop submitting batches before the job's spend (committed + next batch) "
        "exceeds USD; rerun with a larger --budget to continue.",
    )
    allow_untracked_cost: bool = Field(
        default=False, description="Run a model with no known price (its cost is recorded as 0)."
    )
    max_failed_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="merged's failed_rows check fails (WARN) when more than this share of the "
        "rows failed; 0: any failed row.",
    )
    error_failed_share: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="merged's failed_rows check fails at ERROR severity when more than this "
        "share of the rows failed.",
    )
    reuse: bool = Field(
        default=True,
        description="Rows whose request has a stored answer from an earlier run are filled from "
        "it, not sent (--no-reuse: send every row).",
    )
    max_enqueued_tokens: int | None = Field(
        default=None,
        ge=1,
        description="The provider queue's limit for this model (OpenAI: prompt tokens enqueued "
        "in batches); shards wait locally instead of failing. Default: learned from the provider.",
    )
    priority: int = Field(
        default=0,
        description="Among waiting jobs of the same team on one provider queue, higher goes "
        "first; Gemini batches carry it as their batch.priority (higher is processed first).",
    )
    endpoint: Literal["chat", "responses"] = Field(
        default="chat",
        description="The API each request goes to: chat (chat completions) or responses "
        "(OpenAI's Responses API, /v1/responses: reasoning.effort, max_output_tokens).",
    )
    cache: Literal["auto", "off"] = Field(
        default="auto",
        description="Prompt caching: auto marks the shared prefix (system prompt) for the "
        "provider's cache (Anthropic cache_control, OpenAI prompt_cache_key); off sends no "
        "cache hints.",
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        validation_alias=_or_alias("deadline_s"),
        description="e.g. 6h, 90s, 1h30m: rows still in batches when it approaches are cancelled "
        "there and sent through the flex tier while time allows (batch prices), else the "
        "real-time API (real-time prices).",
    )
    target_hours: float | None = Field(
        default=None,
        gt=0,
        description="Aim to finish within H hours: the shard size is chosen from the provider "
        "and model's batch turnaround by size (batch history), as with --deadline, but nothing "
        "is sent real-time to meet it.",
    )
    stall_percentile: float = Field(
        default=95,
        ge=50,
        lt=100,
        description="A batch in flight longer than this percentile of its provider and model's "
        "turnaround (batch history) is stalled; with a deadline its rows go flex or real-time at "
        "once.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        exclude=True,  # values may be secrets: never in the spec the job's state keeps
        repr=False,
        description="HTTP header 'NAME: VALUE' sent on every request to the provider (one an AI "
        "gateway requires), repeatable; 'NAME: @env:VAR' sends the variable VAR's value; values "
        "are never logged or stored: give them again on each run.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        exclude=True,  # values may be secrets: never in the spec the job's state keeps
        repr=False,
        description="Field KEY=JSON added to the JSON body of the batch provider's control calls "
        "(the batch create) and to the file upload's form (one an OpenAI-compatible gateway "
        "wants, e.g. custom_llm_provider='\"azure\"'), repeatable; values are never logged or "
        "stored: give them again on each run.",
    )
    canary: int | None = Field(
        default=None,
        ge=1,
        description="Before the first batch, send N rows sampled evenly across the input "
        "through the provider's real-time API; stop (exit 4) unless enough succeed. Their "
        "answers are kept, so the job does not pay for them again.",
    )
    canary_min_success: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="The canary's least share of rows that succeed (and, with a response "
        "schema, of replies that match it) for the job to go on.",
    )

    distill: bool = Field(
        default=False,
        description="Answer most rows of a one-field enum or boolean classification without "
        "the LLM: embed every row's prompt, send a sample to the LLM, train a classifier on "
        "it and answer the rows it is sure of (--distill-agreement); the rest go to the LLM.",
    )
    distill_embedding_model: str = Field(
        default="text-embedding-3-small",
        description="With --distill: the embedding model.",
    )
    distill_provider: str | None = Field(
        default=None,
        description="With --distill: the provider of the embeddings (one with kind embeddings "
        "in `maple providers`); default: the job's.",
    )
    distill_dimensions: int | None = Field(
        default=256,
        ge=1,
        description="With --distill: the length of each vector.",
    )
    distill_sample: int = Field(
        default=2000,
        ge=20,
        description="With --distill: how many rows the LLM labels to teach and measure the "
        "classifier (30% of them are held out to measure it).",
    )
    distill_agreement: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="With --distill: the least agreement with the LLM, measured on held-out "
        "sample rows, of the rows the classifier answers; none reachable: every row goes to "
        "the LLM.",
    )

    @model_validator(mode="after")
    def _distill_has_a_label(self) -> "JobSpec":
        """A distilled job answers one enum or boolean field."""
        if self.distill:
            label_field(self.response_schema)
        return self

    @field_validator("name")
    @classmethod
    def _usable_name(cls, name: str) -> str:
        validate_name(name)
        return name

    @field_validator("params", mode="before")
    @classmethod
    def _params_as_given(cls, params: Any) -> Any:
        """None for none, a mapping, or ``NAME=VALUE`` strings with JSON values (``--param``)."""
        if params is None:
            return {}
        if isinstance(params, (list, tuple)):
            return dict(parse_param(spec) for spec in params)
        return params

    @field_validator("params")
    @classmethod
    def _json_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        check_param_values(params)
        return params

    @field_validator("file_columns", mode="before")
    @classmethod
    def _columns_as_given(cls, columns: Any) -> Any:
        """None for none, one column's name, or several."""
        if columns is None:
            return []
        return [columns] if isinstance(columns, str) else list(columns)

    @field_validator("headers", mode="before")
    @classmethod
    def _headers_as_given(cls, headers: Any) -> Any:
        """None for none, a mapping, or ``NAME: VALUE`` strings (``--header``)."""
        return parse_headers(headers)

    @field_validator("extra_body", mode="before")
    @classmethod
    def _extra_body_as_given(cls, fields: Any) -> Any:
        """None for none, a mapping, or ``KEY=JSON`` strings (``--extra-body``)."""
        return parse_extra_body(fields)

    @field_validator("retries", mode="before")
    @classmethod
    def _retries_as_given(cls, retries: Any) -> Any:
        """None for none, ``{CLASS: N | "unlimited"}``, or ``CLASS=N|unlimited`` strings
        (``--retry``)."""
        if retries is None:
            return {}
        if isinstance(retries, (list, tuple)):
            return parse_retry_options(list(retries))
        if isinstance(retries, Mapping):
            return {k: UNLIMITED if v == "unlimited" else v for k, v in retries.items()}
        return retries

    @field_validator("retries")
    @classmethod
    def _valid_retries(cls, retries: dict[str, int]) -> dict[str, int]:
        check_retries(retries)
        return retries

    @field_validator("response_schema", mode="before")
    @classmethod
    def _schema_as_given(cls, schema: Any) -> Any:
        """A JSON schema as a dict, a pydantic model class, or a JSON file's path."""
        if isinstance(schema, (str, os.PathLike)):
            return read_schema(schema)
        return schema_dict(schema)

    @field_validator("max_enqueued_tokens", mode="before")
    @classmethod
    def _token_count(cls, tokens: Any) -> Any:
        if isinstance(tokens, bool):
            raise ValueError(
                f"max_enqueued_tokens={tokens!r}: give the provider queue's limit as a positive "
                "number of tokens (e.g. 2000000), or leave it unset to learn it"
            )
        return tokens

    @field_validator("deadline_s", mode="before")
    @classmethod
    def _duration(cls, deadline: Any) -> Any:
        """A deadline as given: a duration ("6h", "1h30m"), seconds, or a timedelta."""
        if isinstance(deadline, timedelta):
            return deadline.total_seconds()
        if isinstance(deadline, str):
            return parse_duration(deadline, "--deadline")
        return deadline

    def fingerprint(self) -> str:
        """Hash of the fields that change what is sent (not output path, budget or retries)."""
        keys: tuple[str, ...] = (
            "prompt",
            "model",
            "provider",
            "system",
            "params",
            "source",
            "response_schema",
            "image_column",
            "max_requests_per_batch",
            "max_batch_bytes",
        )
        if self.kind.fingerprinted:  # a chat job's fingerprint stays what it was
            keys = (*keys, *self.kind.options)
        fields = {k: getattr(self, k) for k in keys}
        if self.kind.fingerprinted:
            fields["kind"] = self.kind.name
        if self.cache != "auto":  # only then: jobs from before --cache keep their versions
            fields["cache"] = self.cache
        if self.endpoint != "chat":  # as --cache: chat jobs keep the versions they had
            fields["endpoint"] = self.endpoint
        if self.file_columns:  # as --cache: jobs without files keep their versions
            fields["file_columns"] = list(self.file_columns)
        payload = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(payload).hexdigest()[:16]

    def cache_key(self) -> str:
        """The prompt-cache key of this job version: requests sharing it share a cache."""
        digest = hashlib.sha256(f"{self.name}/{self.fingerprint()}".encode()).hexdigest()
        return f"maple-{digest[:16]}"

    def call_decorations(
        self,
        provider: str,
        *,
        takes_extra_body: bool,
        control_fields: frozenset[str] = frozenset(),
        attribution: AttributionMap,
        sending: threading.Event | None = None,
    ) -> CallDecorations:
        """What this job adds to the calls of ``provider`` (its name, whether it takes extra
        control-call fields, its team attribution map): its headers, its extra control-call
        fields and its team's accounts (`decorations_for`), and the early start's ``sending``.
        A job option that reaches the wire is passed on here."""
        return decorations_for(
            provider,
            takes_extra_body=takes_extra_body,
            control_fields=control_fields,
            attribution=attribution,
            headers=self.headers,
            extra_body=self.extra_body,
            team=self.team,
            sending=sending,
        )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()

    def output_format(self) -> str:
        """``parquet`` or ``csv``: the output path's extension, else the input's format."""
        for path in (self.output, self.source):
            if path:
                fmt = file_format(path, strict=False)
                if fmt:
                    return fmt
        return "parquet"


# Every option's default, typed (``DEFAULTS.team``); the fields with no default are unset.
DEFAULTS = JobSpec.model_construct()


def foreign_options(kind: Kind) -> set[str]:
    """The job options only other kinds take."""
    others = {f for other in KINDS.values() if other != kind for f in other.options}
    return others - set(kind.options)


def _default(field: str) -> Any:
    return getattr(DEFAULTS, field)


def job_options(kind: Kind) -> list[str]:
    """The job options a job of ``kind`` takes (``kind`` itself is the command's)."""
    foreign = foreign_options(kind)
    return [f for f in JobSpec.model_fields if f != "kind" and f not in foreign]


def option_help(field: str) -> str:
    """The help text of one job option."""
    return JobSpec.model_fields[field].description or ""


def build_spec(**fields: Any) -> JobSpec:
    """A ``JobSpec`` from keyword values (the fields or their ``ALIASES``, as the validators
    read them); a value out of bounds is one clear ``ConfigError``."""
    try:
        return JobSpec(**fields)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """The first error of a validation as one line: a check's own message (it names what it
    checks), else ``field=value: what is wrong``."""
    return error_message(exc.errors()[0])


def error_message(error: Any) -> str:
    """One error of a validation (pydantic's error dict) as one line (`validation_message`)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"] or error["type"] == "value_error":
        return message if message.endswith(".") else f"{message}."
    field = ".".join(str(part) for part in error["loc"])
    return f"{field}={error.get('input')!r}: {message}."


def schema_dict(response_schema: Any) -> Any:
    """A JSON schema from a pydantic model class; anything else as it is."""
    if isinstance(response_schema, type) and hasattr(response_schema, "model_json_schema"):
        return dict(response_schema.model_json_schema())
    return response_schema


def read_schema(path: "str | os.PathLike[str]") -> dict[str, Any]:
    """The JSON schema in the file at ``path`` (``--response-schema``)."""
    try:
        schema = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"--response-schema {path}: cannot be read ({exc}).") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--response-schema {path}: not valid JSON ({exc}).") from None
    if not isinstance(schema, dict):
        raise ConfigError(f"--response-schema {path}: a JSON schema must be an object.")
    return schema


def check_param_values(params: dict[str, Any]) -> None:
    """Parameters go into every request body as JSON: they must be JSON values."""
    for name, value in params.items():
        if not name:
            raise ConfigError("A model parameter has an empty name: write NAME=VALUE.")
        try:
            orjson.dumps(value)
        except TypeError as exc:
            raise ConfigError(
                f"Model parameter {name!r} = {value!r} is not a JSON value ({exc})."
            ) from exc
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"Model parameter {name!r} = {value} is not a finite number.")


def parse_param(spec: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with a JSON value; a non-JSON value is an error that shows the quoting."""
    name, sep, value = spec.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"--param {spec!r}: expected NAME=VALUE, e.g. --param temperature=0.")
    try:
        return name.strip(), orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        quoted = orjson.dumps(value).decode()
        raise ConfigError(
            f"--param {spec!r}: {value!r} is not a JSON value. Numbers, true/false, null, "
            f"lists and objects are written as JSON; quote a string: --param '{name}={quoted}'."
        ) from exc


def file_format(path: str, strict: bool = True) -> str | None:
    lowered = path.lower().split("?")[0]
    for suffix, fmt in ((".parquet", "parquet"), (".pq", "parquet"), (".csv", "csv")):
        if lowered.endswith(suffix):
            return fmt
    if strict:
        raise ConfigError(
            f"Unsupported file type: {path!r}. Give a .csv or .parquet file "
            "(for an output path, the extension picks the format)."
        )
    return None


def validate_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "_-." for c in name) or not name[0].isalnum():
        raise ConfigError(
            f"Job name {name!r} is not usable as a folder name on every store: use letters, "
            "digits, '_', '-' and '.', starting with a letter or digit (e.g. rye-bread-2026)."
        )
    if len(name.encode()) > MAX_JOB_NAME:
        raise ConfigError(
            f"Job name {name[:20]}... is {len(name.encode())} bytes long: it names folders and "
            f"files on every store, so keep it to {MAX_JOB_NAME} bytes (shorten --job)."
        )


def validate_paths(spec: JobSpec) -> None:
    """Input exists and is a supported format; the output would not overwrite the input."""
    validate_source(spec)
    validate_output(spec)


def validate_source(spec: JobSpec) -> None:
    """Input exists and is a supported format."""
    if spec.source:
        file_format(spec.source)
        if not is_remote(spec.source) and not os.path.isfile(spec.source):
            raise ConfigError(f"Input file {spec.source!r} does not exist or is not a file.")


def validate_output(spec: JobSpec) -> None:
    """The output is a supported format and would not overwrite the input."""
    if spec.output:
        file_format(spec.output)
        if spec.source and _same_path(spec.source, spec.output):
            raise ConfigError(
                f"The output path {spec.output!r} is the input file: writing it would destroy "
                "the input. Choose another --output."
            )


def _same_path(a: str, b: str) -> bool:
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    if os.path.realpath(a) == os.path.realpath(b):  # through symbolic links too
        return True
    try:
        return os.path.samefile(a, b)  # a hard link to the input
    except OSError:  # the output does not exist yet
        return False


def validate_columns(columns: list[str], spec: JobSpec) -> None:
    clash = [c for c in columns if c in OUTPUT_COLUMNS or c in INTERNAL_COLUMNS]
    if clash:
        raise ConfigError(
            f"Input column(s) {clash} clash with the columns the output adds "
            f"({list(OUTPUT_COLUMNS)}): rename them in the input first."
        )
    if spec.image_column and spec.image_column not in columns:
        raise ConfigError(
            f"--image-column {spec.image_column!r} is not a column of the input. "
            f"Available columns: {columns}."
        )
    missing = [c for c in spec.file_columns if c not in columns]
    if missing:
        raise ConfigError(
            f"--file-column {missing[0]!r} is not a column of the input. "
            f"Available columns: {columns}."
        )
