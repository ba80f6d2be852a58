"""Real-time providers: the batch interface over synchronous chat/messages calls.

``submit`` runs the shard attempt's requests right away with httpx's async client (keep-alive,
bounded and adaptive concurrency), paced to the RPM/TPM learned from the rate-limit headers (or
set explicitly), and checkpoints every finished row (``checkpoints.RowCheckpoints``). Rerunning
the same attempt after a crash sends only the rows without a checkpoint. The returned
``Submission`` has a synthetic batch id ``rt-<job>-<shard>-<attempt>``; ``poll`` reports it ended
(all rows are checkpointed by the time ``submit`` returns; rows without a checkpoint, if any,
read as "not run" and are retried), and ``results`` reads the checkpoints.

Within an attempt a request is retried on 429 (honouring ``retry-after-ms``/``retry-after``),
5xx/529 and timeouts with exponential backoff and jitter, up to ``max_attempts`` sends; then the
row is reported failed with its class and the pipeline's retry policy takes over. Quota errors
(429 ``insufficient_quota``, 402 ``billing_error``, spend limits) are not retried, and stop the
attempt from sending further rows. 401/403 abort the attempt with ``AuthError``.
"""

from typing import Any

import httpx
import orjson
import polars as pl
from pydantic import Field

from maple_engine.failures import FailureClass, classify_http
from maple_engine.providers.anthropic.messages import (
    anthropic_base_url,
    anthropic_headers,
    classify_error,
    message_body_expr,
    parse_message,
)
from maple_engine.providers.base import (
    BatchState,
    ProviderLimits,
    ProviderModel,
    RequestSpec,
    ShardPayload,
    Submission,
)
from maple_engine.providers.http import error_detail, is_quota_error
from maple_engine.providers.openai import wire as openai_wire
from maple_engine.providers.realtime.checkpoints import RowCheckpoints
from maple_engine.providers.realtime.engine import AttemptRun, run_sync
from maple_engine.providers.realtime.rate_shares import RateShare, account_digest
from maple_engine.settings import DEFAULT_STORAGE
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

Row = dict[str, Any]


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
    checkpoint_rows: int = Field(default=200, description="Rows per checkpoint chunk.")
    checkpoint_seconds: float = Field(default=2.0, description="Seconds between chunk writes.")
    max_requests: int = Field(default=10_000, description="Requests per shard.")
    max_bytes: int = Field(default=200 * 1024 * 1024, description="Encoded bytes per shard.")

    # -- wire format (subclasses) -----------------------------------------------------------
    def endpoint(self) -> str:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def resolved_base_url(self) -> str:
        raise NotImplementedError

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        raise NotImplementedError

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        raise NotImplementedError

    # -- the provider interface -------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        return self.name

    @property
    def mode(self) -> str:
        return "realtime"

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

    def _checkpoints(self, job: str, shard: str, attempt: int) -> RowCheckpoints:
        return RowCheckpoints(
            Storage(self.checkpoint_root),
            JobLayout(job).checkpoints(shard, attempt),
            self.checkpoint_rows,
            self.checkpoint_seconds,
        )

    def _share(self, model: str) -> RateShare:
        """This run's share of the account's limit for ``model``, among every live sender."""
        headers = repr(sorted(self.auth_headers().items()))
        account = account_digest(self.resolved_base_url(), headers)
        return RateShare(Storage(self.checkpoint_root), self.name, account, model)

    def submit(self, payload: ShardPayload) -> Submission:
        checkpoints = self._checkpoints(payload.job, payload.shard, payload.attempt)
        batch_id = f"rt-{payload.job}-{payload.shard}-{payload.attempt}"
        done = checkpoints.open()
        todo = payload.requests.filter(~pl.col("custom_id").is_in(list(done)))
        rows = list(zip(todo["custom_id"].to_list(), todo["request"].to_list(), strict=True))
        try:
            run_sync(AttemptRun(self, checkpoints, batch_id, self._share(payload.model)).run(rows))
        finally:
            checkpoints.close()
        return payload.submission(self.name, batch_id, "")

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        states = {}
        for sub in submissions:
            count = self._checkpoints(sub.job, sub.shard, sub.attempt).count()
            status = "completed" if count >= sub.request_count else "incomplete"
            states[sub.batch_id] = BatchState(
                sub.batch_id, status, ended=True, completed=count, total=sub.request_count
            )
        return states

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        sub = submission
        return self._checkpoints(sub.job, sub.shard, sub.attempt).load()

    def cancel(self, submission: Submission) -> None:
        """Nothing runs after ``submit`` returns; a killed run simply stops sending."""

    def find_orphans(self, job: str) -> list[Submission]:
        """Never any: a rerun of an unrecorded attempt resumes from its checkpoints instead."""
        return []


class OpenAIRealtimeProvider(RealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions``, one request per row."""

    name: str = Field(default="openai-realtime", description="Provider name in costs/output.")

    def endpoint(self) -> str:
        return "/chat/completions"

    def resolved_base_url(self) -> str:
        return openai_wire.openai_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return openai_wire.openai_headers(self.api_key)

    def body_expr(self, spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
        return openai_wire.chat_body_expr(spec, user, image)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        return openai_wire.parse_chat_completion(custom_id, body)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, code, error_type = error_detail(response)
        if response.status_code == 429 and is_quota_error(response):
            return FailureClass.INSUFFICIENT_QUOTA.value, message
        if response.status_code == 429 and "too large" in message.lower():
            return FailureClass.INVALID_REQUEST.value, message
        return classify_http(response.status_code, code, error_type).value, message


class AnthropicRealtimeProvider(RealtimeProvider):
    """Anthropic ``POST /v1/messages``, one request per row."""

    name: str = Field(default="anthropic-realtime", description="Provider name in costs/output.")

    def endpoint(self) -> str:
        return "/v1/messages"

    def resolved_base_url(self) -> str:
        return anthropic_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return anthropic_headers(self.api_key)

    def body_expr(self, spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
        return message_body_expr(spec, user, image)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        return parse_message(custom_id, body)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, _, error_type = error_detail(response)
        if _spend_limit(response):
            return FailureClass.INSUFFICIENT_QUOTA.value, message
        return classify_error(error_type, message, response.status_code), message


def _spend_limit(response: httpx.Response) -> bool:
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return False
    details = (body.get("error") or {}).get("details") if isinstance(body, dict) else None
    return isinstance(details, dict) and details.get("error_code") == "enforced_spend_limit_reached"
