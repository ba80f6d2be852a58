"""Gemini Batch API provider: inline requests for small shards, a Files API JSONL for large ones.

A shard whose create body fits ``inline_max_bytes`` (Google: under 20 MB) is sent inline
(``inputConfig.requests.requests[]`` with ``metadata.key``); a larger one is uploaded with the
resumable Files API (``{"key", "request"}`` lines, up to 2 GB) and referenced by
``inputConfig.fileName``. Results come back inline (``output.inlinedResponses``) or as a
responses file downloaded from ``files/...:download``; both are joined on the key.

An embedding job's shards are created with ``models/{model}:asyncBatchEmbedContent`` (the same
inline or file input, of ``EmbedContentRequest`` bodies); their inline results are
``output.inlinedEmbedContentResponses``.

Gemini batches carry no metadata map, so the batch's ``displayName`` carries the labels:
``maple/<job>/<shard>/<attempt>/<hash>``; ``find_orphans`` reads them back from the list.

The job's ``--priority`` (when not 0, the API's default) goes with every batch as
``batch.priority`` (an int64, a string in JSON): Gemini processes batches with a higher value
before those with a lower one, negative values allowed.
"""

import itertools
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field, PrivateAttr

from maple_engine.crashpoints import crash_point
from maple_engine.model import CHAT, EMBEDDING, BatchState, Submission
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    Dialect,
    ProviderCapabilities,
    ProviderModel,
    RequestSpec,
    ShardPayload,
    json_string_expr,
    poll_batches,
    rows_frame,
)
from maple_engine.providers.batch_api import BatchProviderBasics, jsonl, wrapped_bytes_expr
from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.gemini import params
from maple_engine.providers.gemini.api import get_batch, list_batches, request, upload_file
from maple_engine.providers.gemini.file_parts import FILES
from maple_engine.providers.gemini.user_files import user_file
from maple_engine.providers.gemini.wire import (
    API_VERSION,
    CACHING,
    INPUT_LIMITS,
    MODELS,
    embeds,
    gemini_api_key,
    gemini_base_url,
    gemini_body_expr,
    model_path,
    parse_result_line,
)
from maple_engine.providers.http import LOOKUP_DEPTH, first_contact, make_client

_HEAD, _MID = '{"key":', ',"request":'
#: REST batch state -> the platform's batch status (``ENDED_STATES`` are the terminal ones).
STATES = {
    "BATCH_STATE_PENDING": "pending",
    "BATCH_STATE_RUNNING": "running",
    "BATCH_STATE_SUCCEEDED": "completed",
    "BATCH_STATE_FAILED": "failed",
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired",
}
_ENDED = {"completed", "failed", "cancelled", "expired"}
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=BATCH_FILE_LIMITS,  # Google allows 2 GB per file; smaller shards resume sooner
    dialect=Dialect.GEMINI,
    rules=params.RULES,
    price_families=("google",),
    orphans="name-labels",
    realtime_twin="gemini-realtime",
    flex_twin="gemini-flex",
    priority_twin="gemini-priority",
    credentials="gemini",
    caching=CACHING,
    kinds=frozenset({CHAT, EMBEDDING}),
    input_limits=INPUT_LIMITS,
    models=MODELS,
    files=FILES,
)


def display_name(payload: ShardPayload, digest: str) -> str:
    return f"maple/{payload.job}/{payload.shard}/{payload.attempt}/{digest}"


class GeminiBatchProvider(BatchProviderBasics, ProviderModel):
    """Runs shards through the Gemini Batch API (50% of real-time prices)."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    _http: httpx.Client | None = PrivateAttr(default=None)

    name: str = Field(default="gemini", description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (the code location: EnvVar GEMINI_API_KEY)."
    )
    base_url: str | None = Field(
        default=None,
        description="Scheme and host, no version; default: Google's.",
    )
    timeout_s: float = Field(default=120.0, description="HTTP timeout per call, seconds.")
    max_retries: int = Field(default=6, description="Retries of a control call on 429/5xx.")
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Requests per batch (shard size)."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes,
        description="Bytes per input file (Google allows 2 GB; smaller shards resume sooner).",
    )
    inline_max_bytes: int = Field(
        default=19 * 1024 * 1024,
        description="Create bodies up to this size go inline (Google: the request under 20 MB).",
    )

    def check_credentials(self) -> None:
        gemini_api_key(self.api_key)

    def upload_user_file(self, digest: str, file: AttachedFile) -> UploadedFile:
        """``file`` uploaded by the Files API for ``fileData`` parts (`user_files.user_file`)."""
        with self._client() as client:
            return user_file(client, digest, file, self.max_retries)

    def _new_client(self) -> httpx.Client:
        headers = {"x-goog-api-key": gemini_api_key(self.api_key)} | self.extra_headers
        return make_client(gemini_base_url(self.base_url), headers, self.timeout_s)

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return gemini_body_expr(spec, user, image, files=files)

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return wrapped_bytes_expr(custom_id, request, _HEAD, _MID)

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The input file: one ``{"key", "request"}`` line per request."""
        return jsonl(requests, _HEAD, _MID)

    @staticmethod
    def _inline(requests: pl.DataFrame) -> bytes:
        items = requests.select(
            pl.concat_str(
                [
                    pl.lit('{"request":'),
                    pl.col("request"),
                    pl.lit(',"metadata":{"key":'),
                    json_string_expr(pl.col("custom_id")),
                    pl.lit("}}"),
                ]
            )
        ).to_series()
        return ('{"requests":{"requests":[' + ",".join(items.to_list()) + "]}}").encode()

    # -- lifecycle --------------------------------------------------------------------------
    def submit(self, payload: ShardPayload) -> Submission:
        data, digest = payload.encoded(self.encode)
        label = display_name(payload, digest)
        what = f"job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        inline = self._inline(payload.requests)
        with self._client() as client:
            file_name = None
            if len(inline) > self.inline_max_bytes:
                file_name = upload_file(client, data, label, what, self.max_retries)
                crash_point("after_upload")
                config = b'{"fileName":' + orjson.dumps(file_name) + b"}"
            else:
                config = inline
            body = b'{"batch":{"displayName":' + orjson.dumps(label)
            if payload.priority:
                body += b',"priority":' + orjson.dumps(str(payload.priority))
            body += b',"inputConfig":' + config + b"}}"
            method = (
                "asyncBatchEmbedContent" if embeds(payload.requests) else "batchGenerateContent"
            )
            created = request(
                client,
                "POST",
                f"/{API_VERSION}/{model_path(payload.model)}:{method}",
                what=f"create batch for {what}",
                max_retries=self.max_retries,
                content=body,
                headers={"content-type": "application/json"},
                made=lambda: self._created(client, label),
            ).json()
        return payload.submission(self.name, str(created["name"]), digest, file_id=file_name)

    def _created(self, client: httpx.Client, label: str) -> dict[str, Any] | None:
        """The batch named ``label`` (job, shard, attempt, content digest) among the newest
        `LOOKUP_DEPTH`, if any."""
        for batch in itertools.islice(list_batches(client, self.max_retries), LOOKUP_DEPTH):
            if (batch.get("metadata") or {}).get("displayName") == label:
                return dict(batch)
        return None

    def _state(self, batch: dict[str, Any]) -> BatchState:
        meta = batch.get("metadata") or {}
        status = STATES.get(str(meta.get("state")), "pending")
        stats = meta.get("batchStats") or {}
        error = batch.get("error") or {}
        code = str(error.get("status") or error.get("code") or "")
        if code in {"RESOURCE_EXHAUSTED", "8", "429"}:
            code = "rate_limit_exceeded"  # the enqueued-token quota: resent later
        return BatchState(
            batch_id=str(batch["name"]),
            status=status,
            ended=status in _ENDED,
            errors=(str(error["message"]),) if error.get("message") else (),
            error_codes=(code,) if code else (),
            completed=int(stats.get("successfulRequestCount") or 0),
            failed=int(stats.get("failedRequestCount") or 0),
            total=int(stats.get("requestCount") or 0),
        )

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        with self._client() as client:
            return poll_batches(
                {s.batch_id for s in submissions},
                lambda: list_batches(client, self.max_retries),
                lambda name: get_batch(client, name, self.max_retries),
                self._state,
            )

    def check_endpoint(self) -> None:
        """List one batch: the key, the URL and the API are checked before any upload."""
        with self._client() as client:
            first_contact(
                client,
                f"/{API_VERSION}/batches",
                params={"pageSize": 1},
                api="the Gemini Batch API",
                family=self.capabilities.credentials,
            )

    def cancel(self, submission: Submission) -> None:
        with self._client() as client:
            request(
                client,
                "POST",
                f"/{API_VERSION}/{submission.batch_id}:cancel",
                what=f"cancel {submission.batch_id}",
                max_retries=self.max_retries,
            )

    def find_orphans(self, job: str) -> list[Submission]:
        found: list[Submission] = []
        with self._client() as client:
            for batch in list_batches(client, self.max_retries):
                meta = batch.get("metadata") or {}
                label = str(meta.get("displayName") or "")
                if not label.startswith("maple/"):
                    continue
                parts = label.removeprefix("maple/").rsplit("/", 3)
                if len(parts) != 4 or parts[0] != job or not parts[2].isdigit():
                    continue
                if meta.get("state") == "BATCH_STATE_FAILED":
                    continue
                found.append(
                    Submission(
                        provider=self.name,
                        job=job,
                        shard=parts[1],
                        attempt=int(parts[2]),
                        batch_id=str(batch["name"]),
                        request_count=int((meta.get("batchStats") or {}).get("requestCount") or 0),
                        content_hash=parts[3],
                        submitted_at=str(meta.get("createTime", "")),
                        adopted=True,
                    )
                )
        return found

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        name = submission.batch_id
        with self._client() as client:
            output = (get_batch(client, name, self.max_retries).get("metadata") or {}).get(
                "output"
            ) or {}
            inline = output.get("inlinedResponses") or output.get("inlinedEmbedContentResponses")
            lines: list[dict[str, Any]] = list((inline or {}).get("inlinedResponses") or [])
            responses_file = output.get("responsesFile")
            if responses_file:
                content = request(
                    client,
                    "GET",
                    f"/download/{API_VERSION}/{responses_file}:download",
                    what=f"download results of {name}",
                    max_retries=self.max_retries,
                    result_file=True,
                    params={"alt": "media"},
                ).content
                crash_point("mid_download")
                lines += [orjson.loads(raw) for raw in content.splitlines() if raw.strip()]
        rows = [parse_result_line(line) for line in lines]
        return rows_frame(rows, name)
