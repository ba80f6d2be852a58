"""The definition of one enrichment job, and the checks it must pass before anything is sent."""

import dataclasses
import hashlib
import os
from typing import Any

import orjson

from maple_engine.errors import ConfigError
from maple_engine.storage.storage import is_remote

ROW_ID = "_maple_row_id"
CUSTOM_ID = "_maple_custom_id"
REQUEST = "_maple_request"
KEY = "_maple_key"  # the request key (maple_engine.storage.response_store)
INTERNAL_COLUMNS = (ROW_ID, CUSTOM_ID, REQUEST, KEY)

OUTPUT_COLUMNS = (
    "llm_response",
    "llm_parsed",
    "llm_status",
    "llm_failure_class",
    "llm_error",
    "llm_attempts",
    "llm_input_tokens",
    "llm_output_tokens",
    "llm_cost_usd",
    "llm_model",
    "llm_batch_id",
    "llm_reused",
)

MB = 1_000_000
MAX_JOB_NAME = 100  # bytes: a file name component on every store, with room for suffixes


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Everything that decides what is sent; a rerun of the same job must agree on it."""

    name: str
    prompt: str
    model: str
    provider: str = "openai"
    team: str = "default"
    system: str | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    source: str | None = None
    output: str | None = None
    max_requests_per_batch: int = 50_000
    max_batch_bytes: int = 200 * MB
    response_schema: dict[str, Any] | None = None
    image_column: str | None = None
    retries: dict[str, int] = dataclasses.field(default_factory=dict)
    budget_usd: float | None = None
    allow_untracked_cost: bool = False
    reuse: bool = True  # fill rows from the response store (False: send every row)
    max_enqueued_tokens: int | None = None  # the provider queue's limit (None: learn it)
    priority: int = 0  # among the waiting jobs of one team, higher goes first
    deadline_s: float | None = None  # rows still in batches then go through real-time

    def fingerprint(self) -> str:
        """Hash of the fields that change what is sent (not output path, budget or retries)."""
        keys = (
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
        payload = orjson.dumps({k: getattr(self, k) for k in keys}, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(payload).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def output_format(self) -> str:
        """``parquet`` or ``csv``: the output path's extension, else the input's format."""
        for path in (self.output, self.source):
            if path:
                fmt = file_format(path, strict=False)
                if fmt:
                    return fmt
        return "parquet"


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
    if spec.source:
        file_format(spec.source)
        if not is_remote(spec.source) and not os.path.isfile(spec.source):
            raise ConfigError(f"Input file {spec.source!r} does not exist or is not a file.")
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
    return os.path.abspath(a) == os.path.abspath(b)


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


def check_queue_options(
    max_enqueued_tokens: int | None, priority: int, deadline: Any
) -> dict[str, Any]:
    """The queue and deadline settings of a job, checked before anything is sent."""
    from datetime import timedelta

    from maple_engine.submit.deadline import parse_duration

    if max_enqueued_tokens is not None and (
        isinstance(max_enqueued_tokens, bool) or int(max_enqueued_tokens) < 1
    ):
        raise ConfigError(
            f"max_enqueued_tokens={max_enqueued_tokens!r}: give the provider queue's limit as a "
            "positive number of tokens (e.g. 2000000), or leave it unset to learn it."
        )
    if isinstance(deadline, timedelta):
        deadline = deadline.total_seconds()
    if isinstance(deadline, str):
        deadline = parse_duration(deadline, "deadline")
    if deadline is not None and float(deadline) <= 0:
        raise ConfigError(f"deadline={deadline!r} must be longer than zero (e.g. '6h').")
    return {
        "max_enqueued_tokens": int(max_enqueued_tokens) if max_enqueued_tokens else None,
        "priority": int(priority),
        "deadline_s": float(deadline) if deadline is not None else None,
    }
