"""OpenAI Batch API provider (files + batches), for any OpenAI-compatible base URL."""

import contextlib
import itertools
import tempfile
from typing import Any, ClassVar

import httpx
import polars as pl
from pydantic import Field, PrivateAttr

from maple_engine.crashpoints import crash_point
from maple_engine.errors import ConfigError, ProviderError
from maple_engine.failures import classify_http, classify_line_error
from maple_engine.model import CHAT, EMBEDDING, ENDED_STATES, BatchState, Submission
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    Dialect,
    ProviderCapabilities,
    ProviderLimits,
    ProviderModel,
    RequestSpec,
    ShardPayload,
    json_literal,
    result_frame,
)
from maple_engine.providers.batch_api import (
    BatchCollection,
    BatchProviderBasics,
    RestBatchCalls,
    jsonl,
    wrapped_bytes_expr,
)
from maple_engine.providers.extra_body import form_fields
from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.http import LOOKUP_DEPTH, download, make_client, request
from maple_engine.providers.lost import LOST
from maple_engine.providers.openai import billing, wire
from maple_engine.providers.openai.file_parts import FILES
from maple_engine.providers.openai.lines import parse_result_file
from maple_engine.providers.openai.params import RULES
from maple_engine.providers.openai.user_files import upload, user_file
from maple_engine.settings import api_key_env

LIST_PAGE = 100
#: A batch create answered so made nothing: a refusal of the request, not a busy service.
REFUSED_CREATE = frozenset({400, 401, 403, 404, 422})
# The fields of the batch create and the upload form Maple sets (``--extra-body`` adds others).
CONTROL_FIELDS = frozenset(
    {"input_file_id", "endpoint", "completion_window", "metadata", "purpose", "file"}
)
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=BATCH_FILE_LIMITS,
    dialect=Dialect.OPENAI,
    rules=RULES,
    price_families=("openai",),
    kinds=frozenset({CHAT, EMBEDDING}),
    queue="enqueued-tokens",
    orphans="batch-metadata",
    realtime_twin="openai-realtime",
    flex_twin="openai-flex",
    priority_twin="openai-priority",
    endpoints=frozenset({"chat", "responses"}),
    reasoning_models=wire.REASONING_MODELS,
    credentials="openai",
    completion_windows=("24h",),
    takes_extra_body=True,
    control_fields=CONTROL_FIELDS,
    billing_report=billing.billing_report,
    caching=wire.CACHING,
    models=wire.MODELS,
    attribution="project-header",
    # Output and error files are deleted 30 days after the batch completes (the Batch guide,
    # https://platform.openai.com/docs/guides/batch; Maple sends no ``output_expires_after``).
    results_retention_s=30 * 24 * 3600,
    files=FILES,
    # batch.completed, .failed, .expired, .cancelled (maple_engine.providers.openai.webhooks)
    webhooks="openai",
)


class OpenAIBatchProvider(BatchProviderBasics, RestBatchCalls, ProviderModel):
    """Runs shards through the OpenAI Batch API: upload JSONL, create, poll, download, parse."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    #: the base URL when none is given (None: one must be, an OpenAI-compatible API's)
    default_base_url: ClassVar[str | None] = wire.DEFAULT_BASE_URL
    _http: httpx.Client | None = PrivateAttr(default=None)

    name: str = Field(default="openai", description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (the code location: EnvVar OPENAI_API_KEY)."
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL ending in /v1; default: OpenAI's.",
    )
    endpoint: str = Field(default="/v1/chat/completions", description="Batch endpoint (chat).")
    embeddings_endpoint: str = Field(
        default="/v1/embeddings", description="Batch endpoint of embedding jobs."
    )
    responses_endpoint: str = Field(
        default="/v1/responses", description="Batch endpoint of --endpoint responses jobs."
    )
    completion_window: str = Field(default="24h", description="Batch completion window.")
    file_purpose: str = Field(default="batch", description="Purpose of uploaded batch files.")
    timeout_s: float = Field(default=120.0, description="HTTP timeout per call, seconds.")
    max_retries: int = Field(default=6, description="Retries of a control call on 429/5xx.")
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Provider limit: requests per batch."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes, description="Provider limit: bytes per file."
    )

    @property
    def provider_name(self) -> str:
        return self.name

    def limits(self) -> ProviderLimits:
        return ProviderLimits(self.max_requests, self.max_bytes)

    def resolved_base_url(self) -> str:
        base_url = self.base_url or self.default_base_url
        if base_url is None:
            env = self.capabilities.variable("base_url")
            raise ConfigError(
                f"--provider {self.name} needs the API's base URL: give --base-url or set {env} "
                "(the prefix before /files and /batches, e.g. http://127.0.0.1:8787/v1)."
            )
        return base_url.rstrip("/")

    def _key_env(self) -> str:
        caps = self.capabilities
        return caps.variable("api_key") if caps.credentials else api_key_env("openai")

    def auth_headers(self) -> dict[str, str]:
        """The key's header on every call (a bearer token; an API may take another)."""
        return wire.openai_headers(self.api_key, self._key_env())

    def query_params(self) -> dict[str, str]:
        """What every call carries in its query (none; an API version where one is)."""
        return {}

    def check_credentials(self) -> None:
        self.resolved_base_url()
        self.auth_headers()

    def _new_client(self) -> httpx.Client:
        headers = self.auth_headers() | self.extra_headers
        params = self.query_params()
        return make_client(self.resolved_base_url(), headers, self.timeout_s, params=params)

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return wire.body_expr(spec, user, image, files=files)

    def _endpoint(self, requests: pl.DataFrame | None) -> str:
        path = wire.path_of(requests) if requests is not None else wire.CHAT_PATH
        if path == wire.EMBEDDINGS_PATH:
            return self.embeddings_endpoint
        return self.responses_endpoint if path == wire.RESPONSES_PATH else self.endpoint

    def _line_prefix(self, endpoint: str) -> tuple[str, str]:
        return '{"custom_id":', ',"method":"POST","url":' + json_literal(endpoint) + ',"body":'

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        """Sized with the chat endpoint, the longer of the two (a bound for embeddings)."""
        return wrapped_bytes_expr(custom_id, request, *self._line_prefix(self.endpoint))

    def encode(self, requests: pl.DataFrame) -> bytes:
        return jsonl(requests, *self._line_prefix(self._endpoint(requests)))

    # -- lifecycle --------------------------------------------------------------------------
    def submit(self, payload: ShardPayload) -> Submission:
        data, digest = payload.encoded(self.encode)
        what = f"job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        # The content's digest in the name: a file found under it holds these very lines.
        file_name = f"{payload.shard}-{payload.attempt}-{digest[:16]}.jsonl"
        with self._client() as client:
            file_id = self._upload(client, file_name, data, self.file_purpose, f"upload {what}")
            crash_point("after_upload")
            try:
                created = self._create(client, payload, file_id, digest)
            except ProviderError as exc:
                if exc.status in REFUSED_CREATE:  # nothing made: its file is not left behind
                    self._delete_file(client, file_id)
                raise
        return payload.submission(self.name, str(created.json()["id"]), digest, file_id=file_id)

    def _create(
        self, client: httpx.Client, payload: ShardPayload, file_id: str, digest: str
    ) -> httpx.Response:
        """The batch create of ``payload``'s input ``file_id``; a create whose answer is lost is
        looked up by its metadata before it is sent again."""
        meta = payload.metadata(digest)
        what = f"job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        return request(
            client,
            "POST",
            self._batches().path,
            what=f"create batch for {what}",
            max_retries=self.max_retries,
            json=self._create_json(payload, file_id, digest),
            headers=self._create_headers(payload),
            made=lambda: self._created(client, meta),
        )

    def _create_headers(self, payload: ShardPayload) -> dict[str, str]:
        """What the batch create carries besides the client's headers (none; an API may want
        the model or a role there)."""
        return {}

    def _delete_file(self, client: httpx.Client, file_id: str) -> None:
        """Delete an uploaded file no batch will read (best effort: it expires anyway)."""
        with contextlib.suppress(ProviderError):
            what = f"delete file {file_id}"
            request(client, "DELETE", f"/files/{file_id}", what=what, max_retries=1, window_s=0)

    def upload_user_file(self, digest: str, file: AttachedFile) -> UploadedFile:
        """``file`` uploaded for use in requests (`user_files.user_file`)."""
        with self._client() as client:
            return user_file(client, digest, file, form_fields(self.extra_body), self.max_retries)

    def _upload(
        self, client: httpx.Client, file_name: str, data: bytes, purpose: str, what: str
    ) -> str:
        """The id of ``data`` uploaded as ``file_name`` with ``purpose`` (found again by name
        where its answer is lost)."""
        form = {**form_fields(self.extra_body), "purpose": purpose}
        query = self._files_query(file_name)
        return upload(client, file_name, data, form, query, self.max_retries, what)

    def _files_query(self, file_name: str) -> dict[str, Any]:
        """The query listing the newest uploads, where ``file_name`` would be."""
        return {"purpose": self.file_purpose, "order": "desc", "limit": LOOKUP_DEPTH}

    def _created(self, client: httpx.Client, meta: dict[str, str]) -> dict[str, Any] | None:
        """The batch whose metadata holds ``meta`` (job, shard, attempt, content digest) among
        the newest `LOOKUP_DEPTH` of the job's listing, if any."""
        listed = self._batches().listing(client, self._job_filter(meta["maple_job"]))
        for batch in itertools.islice(listed, LOOKUP_DEPTH):
            held = batch.get("metadata") or {}
            if all(held.get(key) == value for key, value in meta.items()):
                return dict(batch)
        return None

    def _create_json(self, payload: ShardPayload, file_id: str, digest: str) -> dict[str, Any]:
        """The batch create's body for ``payload``'s uploaded file ``file_id``."""
        return {
            **self.extra_body,  # Maple's own fields win (check_credentials refuses them)
            "input_file_id": file_id,
            "endpoint": self._endpoint(payload.requests),
            "completion_window": self.completion_window,
            "metadata": payload.metadata(digest),
        }

    def _state(self, batch: dict[str, Any]) -> BatchState:
        errors = (batch.get("errors") or {}).get("data") or []
        counts = batch.get("request_counts") or {}
        status = str(batch["status"]).lower()  # Together documents COMPLETED, IN_PROGRESS...
        return BatchState(
            batch_id=str(batch["id"]),
            status=status,
            ended=status in ENDED_STATES,
            errors=tuple(str(e.get("message", "")) for e in errors),
            error_codes=tuple(str(e.get("code", "")) for e in errors),
            completed=int(counts.get("completed", 0)),
            failed=int(counts.get("failed", 0)),
            total=int(counts.get("total", 0)),
            times=_times(batch),
            results_at=tuple(self._result_files(batch)) if status in ENDED_STATES else (),
        )

    def _batches(self) -> BatchCollection:
        return BatchCollection("/batches", "batch", "after", self.max_retries)

    def find_orphans(self, job: str) -> list[Submission]:
        with self._client() as client:
            listed = self._batches().listing(client, self._job_filter(job))
            found = [self._orphan(job, batch) for batch in listed]
        return [submission for submission in found if submission is not None]

    def _job_filter(self, job: str) -> dict[str, Any]:
        """The listing's filter for ``job``'s batches (none: OpenAI's list takes none)."""
        return {}

    def _orphan(self, job: str, batch: dict[str, Any]) -> Submission | None:
        """A listed batch of ``job`` (by its metadata) that did not fail, as its submission."""
        meta = batch.get("metadata") or {}
        if meta.get("maple_job") != job or str(batch.get("status")).lower() == "failed":
            return None
        return Submission(
            provider=self.name,
            job=job,
            shard=meta.get("maple_shard", ""),
            attempt=int(meta.get("maple_attempt", "0")),
            batch_id=batch["id"],
            request_count=int((batch.get("request_counts") or {}).get("total", 0)),
            content_hash=meta.get("maple_hash", ""),
            submitted_at=str(batch.get("created_at", "")),
            file_id=batch.get("input_file_id"),
            adopted=True,
        )

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        if state.status == LOST:  # no result lines: every row is unrun and sent again
            return result_frame({})
        with self._client() as client:
            files = state.results_at or self._result_files(
                self._batches().get(client, submission.batch_id)
            )
            frames = [result_frame({})]
            for key, file_id in files:
                with tempfile.NamedTemporaryFile(prefix="maple-", suffix=".jsonl") as spool:
                    download(
                        client,
                        f"/files/{file_id}/content",
                        spool,
                        what=f"download {key} of batch {submission.batch_id}",
                        max_retries=self.max_retries,
                    )
                    frames.append(
                        parse_result_file(spool.name, submission.batch_id, self._parse_line)
                    )
                crash_point("mid_download")
        return pl.concat(frames)

    def _result_files(self, batch: dict[str, Any]) -> list[tuple[str, str]]:
        """(field, file id) of the batch's result files: its output, then its errors."""
        keys = ("output_file_id", "error_file_id")
        return [(key, str(batch[key])) for key in keys if batch.get(key)]

    @staticmethod
    def _parse_line(line: dict[str, Any]) -> dict[str, Any]:
        """One result line the fast reader left (a failure, a Responses reply) as a row."""
        return _parse_line(line)


def _parse_line(line: dict[str, Any]) -> dict[str, Any]:
    """One output/error JSONL line -> a result row (success only with a 2xx response)."""
    custom_id = line.get("custom_id")
    response = line.get("response")
    error = line.get("error")
    if response is None:
        code = (error or {}).get("code")
        return wire.failed_row(
            custom_id, classify_line_error(code), (error or {}).get("message") or code
        )
    body = response.get("body") or {}
    status = int(response.get("status_code", 0))
    if error is not None or not 200 <= status < 300:
        detail = body.get("error") or error or {}
        cls = classify_http(status, detail.get("code"), detail.get("type"))
        return wire.failed_row(custom_id, cls, detail.get("message") or f"HTTP {status}")
    return wire.parse_reply(custom_id, body)


_PHASE_STAMPS = (
    ("created", ("created_at",)),
    ("validating", ("created_at",)),
    ("in_progress", ("in_progress_at",)),
    ("finalizing", ("finalizing_at",)),
    ("ended", ("completed_at", "failed_at", "expired_at", "cancelled_at")),
)


def _times(batch: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    """The batch object's ``*_at`` stamps as the phases of the batch history."""
    found = []
    for phase, fields in _PHASE_STAMPS:
        stamp = next((batch[f] for f in fields if batch.get(f)), None)
        if stamp is not None:
            found.append((phase, float(stamp)))
    return tuple(found)
