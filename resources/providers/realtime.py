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

import asyncio
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import dagster as dg
import httpx
import orjson
import polars as pl
from pydantic import Field

from resources.errors import AuthError
from resources.failures import FailureClass, classify_http
from resources.http import backoff_seconds, error_detail, is_quota_error, retry_after_seconds
from resources.pricing import DEFAULT_OUTPUT_ESTIMATE, estimate_tokens
from resources.providers.anthropic_messages import (
    anthropic_base_url,
    anthropic_headers,
    classify_error,
    failed_row,
    message_body_expr,
    parse_message,
)
from resources.providers.base import (
    BatchState,
    ProviderLimits,
    RequestSpec,
    ShardPayload,
    Submission,
    now_iso,
)
from resources.providers.checkpoints import RowCheckpoints
from resources.providers.openai_batch import OpenAIBatchProvider, parse_chat_completion
from resources.providers.ratelimits import (
    Gate,
    Pacer,
    TokenEstimator,
    needed_concurrency,
    read_limits,
)
from resources.storage import Storage

T = TypeVar("T")
Row = dict[str, Any]
_JSON = {"content-type": "application/json"}


def _default_root() -> str:
    return os.environ.get("MAPLE_STORAGE", ".maple")


class _Retry(Exception):
    """A send that may be retried: its failure class, message and the server's wait."""

    def __init__(self, failure_class: str, message: str, wait: float | None) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.wait = wait


class RealtimeProvider(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Shared core of the real-time providers (subclasses set the wire format)."""

    name: str = Field(default="realtime", description="Provider name recorded in costs/output.")
    api_key: str | None = Field(default=None, description="API key; defaults to the env var.")
    base_url: str | None = Field(default=None, description="API base URL; defaults to env var.")
    checkpoint_root: str = Field(
        default_factory=_default_root,
        description="Storage root for row checkpoints (the job's root): MAPLE_STORAGE or .maple.",
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

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return request.str.len_bytes()

    def _checkpoints(self, job: str, shard: str, attempt: int) -> RowCheckpoints:
        return RowCheckpoints(
            Storage(self.checkpoint_root),
            f"{job}/state/{shard}/rt-{attempt}",
            self.checkpoint_rows,
            self.checkpoint_seconds,
        )

    def submit(self, payload: ShardPayload) -> Submission:
        checkpoints = self._checkpoints(payload.job, payload.shard, payload.attempt)
        batch_id = f"rt-{payload.job}-{payload.shard}-{payload.attempt}"
        done = checkpoints.open()
        todo = payload.requests.filter(~pl.col("custom_id").is_in(list(done)))
        rows = list(zip(todo["custom_id"].to_list(), todo["request"].to_list(), strict=True))
        try:
            _run_sync(_Run(self, checkpoints, batch_id).run(rows))
        finally:
            checkpoints.close()
        return Submission(
            provider=self.name,
            job=payload.job,
            shard=payload.shard,
            attempt=payload.attempt,
            batch_id=batch_id,
            request_count=payload.requests.height,
            content_hash="",
            submitted_at=now_iso(),
        )

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


class _Run:
    """One attempt's requests: workers, pacing, adaptive concurrency, checkpointing."""

    def __init__(self, provider: RealtimeProvider, checkpoints: RowCheckpoints, batch_id: str):
        self.p = provider
        self.checkpoints = checkpoints
        self.batch_id = batch_id
        self.pacer = Pacer(provider.rpm, provider.tpm)
        self.tokens = TokenEstimator(DEFAULT_OUTPUT_ESTIMATE)
        self.gate = Gate(provider.initial_concurrency, provider.max_concurrency)
        self.latency = 0.5
        self.successes = 0
        self.quota_message: str | None = None

    async def run(self, rows: list[tuple[str, str]]) -> None:
        if not rows:
            return
        queue = iter(rows)
        timeout = httpx.Timeout(self.p.timeout_s, connect=min(10.0, self.p.timeout_s))
        limits = httpx.Limits(
            max_connections=self.p.max_concurrency, max_keepalive_connections=self.p.max_concurrency
        )
        headers = self.p.auth_headers()
        async with httpx.AsyncClient(
            base_url=self.p.resolved_base_url(), headers=headers, timeout=timeout, limits=limits
        ) as client:
            workers = min(len(rows), self.p.max_concurrency)
            try:
                async with asyncio.TaskGroup() as group:
                    ticker = group.create_task(self._tick())
                    tasks = [group.create_task(self._worker(client, queue)) for _ in range(workers)]
                    await asyncio.gather(*tasks)
                    ticker.cancel()
            except* AuthError as errors:
                raise errors.exceptions[0] from None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(0.5, self.p.checkpoint_seconds))
            if self.checkpoints.due():
                self.checkpoints.flush()

    async def _worker(self, client: httpx.AsyncClient, queue: Any) -> None:
        for custom_id, body in queue:
            self.checkpoints.add(await self._request(client, custom_id, body))

    async def _request(self, client: httpx.AsyncClient, custom_id: str, body: str) -> Row:
        raw = estimate_tokens(body)
        last = _Retry(FailureClass.SERVER_ERROR.value, "not sent", None)
        for attempt in range(self.p.max_attempts):
            if self.quota_message is not None:
                return self._row(custom_id, _quota(self.quota_message))
            try:
                return self._row(custom_id, await self._send(client, custom_id, body, raw))
            except _Retry as retry:
                last = retry
            if attempt + 1 < self.p.max_attempts:
                wait = last.wait if last.wait is not None else backoff_seconds(attempt, cap=20.0)
                await asyncio.sleep(wait + backoff_seconds(0, base=0.05))
        message = f"{last} (after {self.p.max_attempts} sends)"
        return self._row(custom_id, failed_row(custom_id, last.failure_class, message))

    def _row(self, custom_id: str, row: Row) -> Row:
        row["custom_id"] = custom_id
        row["batch_id"] = self.batch_id
        return row

    async def _send(self, client: httpx.AsyncClient, custom_id: str, body: str, raw: int) -> Row:
        await self.gate.acquire()
        try:
            delay = self.pacer.reserve(self.tokens.estimate(raw), time.monotonic())
            if delay > 0:
                await asyncio.sleep(delay)
            if self.quota_message is not None:  # learned while this row waited for its turn
                return _quota(self.quota_message)
            started = time.monotonic()
            try:
                response = await client.post(self.p.endpoint(), content=body, headers=_JSON)
            except httpx.TimeoutException as exc:
                raise _Retry(FailureClass.SERVER_ERROR.value, f"timed out: {exc!r}", None) from exc
            except httpx.TransportError as exc:
                raise _Retry(FailureClass.SERVER_ERROR.value, f"transport: {exc!r}", None) from exc
            self.latency = 0.8 * self.latency + 0.2 * (time.monotonic() - started)
        finally:
            await self.gate.release()
        self.pacer.learn(read_limits(response.headers, time.time()), time.monotonic())
        await self._adapt()
        return self._outcome(response, custom_id, raw)

    def _outcome(self, response: httpx.Response, custom_id: str, raw: int) -> Row:
        status = response.status_code
        if status == 200:
            try:
                row = self.p.parse_body(custom_id, orjson.loads(response.content))
            except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
                message = f"unparseable 200 body: {exc}"
                raise _Retry(FailureClass.SERVER_ERROR.value, message, None) from exc
            billed = int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)
            self.tokens.observe(raw, billed)
            self.successes += 1
            self.pacer.recover()
            return row
        if status in {401, 403}:
            message, _, _ = error_detail(response)
            raise AuthError(
                f"{self.p.name}: POST {self.p.endpoint()} answered {status}: {message}. "
                "Check the API key.",
                status,
            )
        failure_class, message = self.p.classify(response)
        if failure_class == FailureClass.INSUFFICIENT_QUOTA.value:
            self.quota_message = message
            return _quota(message)
        if status == 429 and response.headers.get("x-should-retry") == "false":
            return failed_row(custom_id, FailureClass.INVALID_REQUEST.value, f"429: {message}")
        wait = retry_after_seconds(response)
        if status == 429:
            self._rate_limited(response, wait)
            raise _Retry(FailureClass.RATE_LIMITED.value, f"429: {message}", wait)
        if status in {408, 409, 500, 502, 503, 504, 529}:
            raise _Retry(FailureClass.SERVER_ERROR.value, f"{status}: {message}", wait)
        return failed_row(custom_id, failure_class, f"{status}: {message}")

    def _rate_limited(self, response: httpx.Response, wait: float | None) -> None:
        limits = read_limits(response.headers, time.time())
        exhausted = 0 in {limits.remaining_requests, limits.remaining_tokens}
        unknown = limits.remaining_requests is None and limits.remaining_tokens is None
        if exhausted or unknown:
            self.pacer.pause(wait if wait is not None else 1.0, time.monotonic())
            self.pacer.slow_down()
            if not self.pacer.known:
                self.gate.limit = max(1, self.gate.limit // 2)

    async def _adapt(self) -> None:
        """Grow the in-flight bound to what the paced rate needs at the observed latency."""
        if self.pacer.known:
            rate = 1.0 / max(self.pacer.interval(self.tokens.estimate(1)), 1e-3)
            target = needed_concurrency(rate, self.latency, self.p.initial_concurrency)
        elif self.successes and self.successes % (4 * self.gate.limit) == 0:
            target = self.gate.limit + 1  # no limits known: additive increase
        else:
            return
        await self.gate.resize(target)


def _quota(message: str) -> Row:
    return failed_row(None, FailureClass.INSUFFICIENT_QUOTA.value, message)


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion, also from code that already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []

    def target() -> None:
        result.append(asyncio.run(coro))

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return result[0]


class OpenAIRealtimeProvider(RealtimeProvider):
    """OpenAI-compatible ``POST /chat/completions``, one request per row."""

    name: str = Field(default="openai-realtime", description="Provider name in costs/output.")

    def endpoint(self) -> str:
        return "/chat/completions"

    def resolved_base_url(self) -> str:
        return OpenAIBatchProvider(base_url=self.base_url).resolved_base_url()

    def auth_headers(self) -> dict[str, str]:
        probe = OpenAIBatchProvider(api_key=self.api_key)
        probe.check_credentials()
        return {"Authorization": f"Bearer {self.api_key or os.environ['OPENAI_API_KEY']}"}

    def body_expr(self, spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
        return OpenAIBatchProvider().body_expr(spec, user, image)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        return parse_chat_completion(custom_id, body)

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
