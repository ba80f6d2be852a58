"""Anthropic Message Batches provider: one JSON body of ``{custom_id, params}`` per shard.

Anthropic batches carry no metadata, so ``find_orphans`` cannot ask the provider "which batches
are job J's": the provider keeps a create intent per create call under the storage root, at
``<job>/state/anthropic-intents/<shard>-<attempt>.json``, and finds its batches by them
(`maple_engine.providers.create_intents`: a batch a create made is matched by its request count
and creation time).
"""

import time
from datetime import datetime
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field, PrivateAttr

from maple_engine.errors import AuthError, ProviderError, QueueFull, QuotaExhausted
from maple_engine.model import BatchState, Submission
from maple_engine.providers.anthropic import billing, params
from maple_engine.providers.anthropic.file_parts import FILES
from maple_engine.providers.anthropic.messages import (
    ANTHROPIC_VERSION,
    ONE_HOUR,
    anthropic_base_url,
    anthropic_headers,
    check_version_params,
    checked_version,
    claude_caching,
    message_body_expr,
    parse_result_line,
)
from maple_engine.providers.anthropic.workspaces import WorkspaceKeys
from maple_engine.providers.base import (
    Dialect,
    ProviderCapabilities,
    ProviderLimits,
    RequestSpec,
    ShardPayload,
    result_frame,
    rows_frame,
)
from maple_engine.providers.batch_api import (
    BatchCollection,
    BatchProviderBasics,
    RestBatchCalls,
    wrapped_bytes_expr,
    wrapped_requests,
)
from maple_engine.providers.create_intents import CreateIntents, IntentSettings, iso_epoch
from maple_engine.providers.http import (
    RETRYABLE_STATUS,
    Retryable,
    control_retrying,
    error_detail,
    is_quota_error,
    make_client,
    request,
)
from maple_engine.providers.lost import LOST

BATCHES = "/v1/messages/batches"
_HEAD = '{"custom_id":'
_MID = ',"params":'
INTENTS = "anthropic-intents"  # the folder of create intents under the job's state
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=ProviderLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024),
    dialect=Dialect.ANTHROPIC,
    rules=params.RULES,
    price_families=("anthropic",),
    queue="requests",
    orphans="create-intents",
    realtime_twin="anthropic-realtime",
    drops_empty_system=True,
    credentials="anthropic",
    billing_report=billing.billing_report,
    caching=claude_caching(ONE_HOUR),  # a batch runs for up to 24 h: Anthropic advises 1 h
    takes_api_version=True,
    attribution="workspace-key",
    files=FILES,
    # Results stay downloadable for 29 days after the batch is created (the batch processing
    # guide, https://platform.claude.com/docs/en/build-with-claude/batch-processing).
    results_retention_s=29 * 24 * 3600,
)


class AnthropicBatchProvider(BatchProviderBasics, RestBatchCalls, WorkspaceKeys, IntentSettings):
    """Runs shards through Anthropic's Message Batches API: create, poll, download results."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    _http: httpx.Client | None = PrivateAttr(default=None)

    name: str = Field(
        default="anthropic", description="Provider name recorded in costs and output."
    )
    api_key: str | None = Field(
        default=None,
        repr=False,
        description="API key (the code location: EnvVar ANTHROPIC_API_KEY).",
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL without /v1; default: Anthropic's.",
    )
    timeout_s: float = Field(default=120.0, description="HTTP timeout per call, seconds.")
    max_retries: int = Field(default=6, description="Retries of a control call on 429/5xx.")
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Provider limit: requests per batch."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes, description="Provider limit: bytes per batch."
    )

    api_version: str = Field(
        default=ANTHROPIC_VERSION,
        description="The anthropic-version sent (ANTHROPIC_VERSION): 2023-06-01 or 2026-10-21.",
    )

    def check_credentials(self) -> None:
        anthropic_headers(self.sending_key(self.api_key), checked_version(self.api_version))

    def _new_client(self) -> httpx.Client:
        headers = (
            anthropic_headers(self.sending_key(self.api_key), checked_version(self.api_version))
            | self.extra_headers
        )
        return make_client(anthropic_base_url(self.base_url), headers, self.timeout_s)

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        check_version_params(self.api_version, spec.params)
        return message_body_expr(spec, user, image, cache_ttl_s=ONE_HOUR, files=files)

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return wrapped_bytes_expr(custom_id, request, _HEAD, _MID)

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The create body, by concatenating the already-encoded request bodies."""
        items = wrapped_requests(requests, _HEAD, _MID)
        return ('{"requests":[' + ",".join(items) + "]}").encode()

    # -- intents ----------------------------------------------------------------------------
    def _intents(self) -> CreateIntents:
        return self.intents(
            INTENTS,
            count=lambda batch: sum(int(v) for v in (batch.get("request_counts") or {}).values()),
            created=lambda batch: iso_epoch(batch.get("created_at")),
        )

    # -- lifecycle --------------------------------------------------------------------------
    def submit(self, payload: ShardPayload) -> Submission:
        data, digest = payload.encoded(self.encode)
        intents = self._intents()
        intent = intents.opened(payload, digest)
        what = f"create batch for job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        with self._client() as client:
            batch = self._create(client, data, intent, what, payload.job)
        intents.write(payload, {**intent, "batch_id": batch["id"]})
        return payload.submission(self.name, str(batch["id"]), digest)

    def _create(
        self, client: httpx.Client, data: bytes, intent: dict[str, Any], what: str, job: str
    ) -> dict[str, Any]:
        """POST the batch with the control-call retry policy; after an ambiguous failure (a
        timeout or a 5xx: the batch may exist) look for it before sending again, among the
        batches no other intent of the job names (its other shards of the same size)."""
        headers = {"content-type": "application/json"}
        ambiguous = False
        try:
            for attempt in control_retrying(self.max_retries, 0.0, time.monotonic()):
                with attempt:
                    if ambiguous:
                        listing = self._batches().listing(client)
                        found = self._intents().lookup(listing, intent, job)
                        if found is not None:
                            return found
                    ambiguous = True
                    response = client.post(BATCHES, content=data, headers=headers)
                    ambiguous = response.status_code != 429
                    if response.status_code < 400:
                        return dict(response.json())
                    if _queue_full(response):
                        raise QueueFull(f"{what}: {error_detail(response)[0]}", 429)
                    if response.status_code in RETRYABLE_STATUS:
                        raise Retryable(response)
                    raise_for_status(response, what, f"POST {BATCHES}")
        except httpx.TransportError as exc:
            raise ProviderError(f"{what}: POST {BATCHES} failed: {exc!r}") from exc
        except Retryable:
            pass
        raise ProviderError(f"{what}: POST {BATCHES} kept failing after {self.max_retries} retries")

    def find_orphans(self, job: str) -> list[Submission]:
        with self._client() as client:
            return self._intents().orphans(job, self.name, lambda: self._batches().listing(client))

    def _state(self, batch: dict[str, Any]) -> BatchState:
        counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items()}
        status = str(batch.get("processing_status", ""))
        return BatchState(
            batch_id=str(batch["id"]),
            status=status,
            ended=status in {"ended", LOST},
            completed=counts.get("succeeded", 0),
            failed=counts.get("errored", 0) + counts.get("canceled", 0) + counts.get("expired", 0),
            total=sum(counts.values()),
            times=tuple(
                (phase, datetime.fromisoformat(batch[field].replace("Z", "+00:00")).timestamp())
                for phase, field in (("created", "created_at"), ("ended", "ended_at"))
                if batch.get(field)
            ),
            results_at=(("results_url", str(batch["results_url"])),)
            if status == "ended" and batch.get("results_url")
            else (),
        )

    def _batches(self) -> BatchCollection:
        return BatchCollection(BATCHES, "message batch", "after_id", self.max_retries)

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        """Download ``results_url`` (absolute, with the same auth headers) and parse it."""
        if state.status == LOST:  # no result lines: every row is unrun and sent again
            return result_frame({})
        batch_id = submission.batch_id
        with self._client() as client:
            known = dict(state.results_at).get("results_url")
            url = known or self._batches().get(client, batch_id).get("results_url")
            url = url or f"{BATCHES}/{batch_id}/results"
            content = request(
                client,
                "GET",
                str(url),
                what=f"download results of message batch {batch_id}",
                max_retries=self.max_retries,
                result_file=True,
            ).content
        rows = [parse_result_line(orjson.loads(r)) for r in content.splitlines() if r.strip()]
        return rows_frame(rows, batch_id)


def raise_for_status(response: httpx.Response, what: str, call: str) -> None:
    """The error for a non-retryable answer (no secrets: the call names the path only)."""
    message, _, _ = error_detail(response)
    if is_quota_error(response):
        raise QuotaExhausted(f"{what}: the provider reports insufficient quota: {message}")
    detail = f"{what}: {call} answered {response.status_code}: {message}"
    if response.status_code in {401, 403}:
        raise AuthError(f"{detail}. Check the API key.", response.status_code)
    raise ProviderError(detail, response.status_code)


def _queue_full(response: httpx.Response) -> bool:
    """A 429 saying the Message Batches processing queue is full (no batch was created)."""
    return response.status_code == 429 and "queue" in error_detail(response)[0].lower()
