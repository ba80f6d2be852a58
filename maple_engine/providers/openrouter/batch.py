"""``--provider openrouter``: the inline-requests batch dialect, OpenRouter's
(`maple_engine.providers.openrouter.wire`).

One batch per shard attempt: ``POST {base}/batches`` with the attempt's requests inline in the
JSON body (``endpoint`` and ``model`` first, streamed; no file upload), polled at
``{base}/batches/{id}``, its rows read page by page from ``{base}/batches/{id}/results``. A batch
carries no metadata, so a batch made just before a crash, and one whose create answer was lost,
are found again by the create intents kept under the storage root
(`maple_engine.providers.create_intents`). One model a batch: every attempt is one job's, whose
requests all name its ``--model``. The batch API takes text only: a job with images is refused
before anything is sent (`ProviderCapabilities.text_only`), pointing at ``openrouter-realtime``.
"""

from typing import Any, ClassVar

import httpx
import polars as pl
from pydantic import Field, PrivateAttr

from maple_engine.model import CHAT, BatchState, Submission
from maple_engine.providers.base import (
    Dialect,
    ProviderCapabilities,
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
)
from maple_engine.providers.create_intents import CreateIntents, IntentSettings
from maple_engine.providers.http import make_client, request
from maple_engine.providers.lost import LOST
from maple_engine.providers.openai import params
from maple_engine.providers.openai import wire as openai_wire
from maple_engine.providers.openrouter import wire

NAME = "openrouter"
INTENTS = "openrouter-intents"  # the folder of create intents under the job's state
RESULTS_PAGE = 1000
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=wire.LIMITS,
    dialect=Dialect.OPENAI,
    rules=params.RULES,
    price_families=("openrouter",),
    orphans="create-intents",
    kinds=frozenset({CHAT}),
    realtime_twin="openrouter-realtime",
    credentials=wire.CREDENTIALS,
    # "typically billed at 50% of the model's standard per-token pricing"
    batch_price_share=0.5,
    results_retention_s=wire.RESULTS_RETENTION_S,
    text_only=True,
)


class OpenRouterBatchProvider(BatchProviderBasics, RestBatchCalls, IntentSettings):
    """Runs shards through OpenRouter's Batch API: create (inline), poll, read result pages."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    _http: httpx.Client | None = PrivateAttr(default=None)

    name: str = Field(default=NAME, description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (the code location: OPENROUTER_API_KEY)."
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL, the part before /batches (OPENROUTER_BASE_URL); default: "
        f"{wire.DEFAULT_BASE_URL}.",
    )
    timeout_s: float = Field(default=120.0, description="HTTP timeout per call, seconds.")
    max_retries: int = Field(default=6, description="Retries of a control call on 429/5xx.")
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Provider limit: requests per batch."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes, description="Provider limit: bytes per batch."
    )

    def resolved_base_url(self) -> str:
        return wire.api_url(self.base_url)

    def check_credentials(self) -> None:
        openai_wire.openai_headers(self.api_key, self.capabilities.variable("api_key"))

    def _new_client(self) -> httpx.Client:
        key = openai_wire.openai_headers(self.api_key, self.capabilities.variable("api_key"))
        return make_client(self.resolved_base_url(), key | self.extra_headers, self.timeout_s)

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return openai_wire.body_expr(spec, user, image, files=files)

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return wrapped_bytes_expr(custom_id, request, wire.ITEM_HEAD, wire.ITEM_MID)

    def _body(self, payload: ShardPayload) -> wire.CreateBody:
        return wire.CreateBody(wire.CHAT_ENDPOINT, payload.model, payload.requests)

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The create body's requests (its ``endpoint`` and ``model`` are the job's)."""
        return b"".join(wire.CreateBody(wire.CHAT_ENDPOINT, "", requests))

    # -- lifecycle --------------------------------------------------------------------------
    def _intents(self) -> CreateIntents:
        return self.intents(
            INTENTS, count=_total, created=lambda batch: float(batch.get("created_at") or 0)
        )

    def submit(self, payload: ShardPayload) -> Submission:
        digest = payload.encoded(self.encode)[1]
        intents = self._intents()
        intent = intents.opened(payload, digest)
        what = f"job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        batches, body = self._batches(), self._body(payload)
        headers = {"content-type": "application/json", "content-length": str(body.length)}
        with self._client() as client:
            created = request(
                client,
                "POST",
                batches.path,
                what=f"create batch for {what}",
                max_retries=self.max_retries,
                content=body,
                headers=headers,
                made=lambda: intents.lookup(batches.listing(client), intent, payload.job),
            ).json()
        intents.write(payload, {**intent, "batch_id": created["id"]})
        return payload.submission(self.name, str(created["id"]), digest)

    def find_orphans(self, job: str) -> list[Submission]:
        with self._client() as client:
            return self._intents().orphans(job, self.name, lambda: self._batches().listing(client))

    def _state(self, batch: dict[str, Any]) -> BatchState:
        return wire.batch_state(batch)

    def _batches(self) -> BatchCollection:
        return BatchCollection("/batches", "batch", "after", self.max_retries)

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        """The batch's result rows, page by page (a cancelled batch has none: its rows are
        sent again)."""
        if state.status in {LOST, "cancelled", "failed"}:
            return result_frame({})
        batch_id = submission.batch_id
        frames = [result_frame({})]
        cursor: str | None = None
        with self._client() as client:
            while True:
                query: dict[str, Any] = {"limit": RESULTS_PAGE}
                if cursor:
                    query["cursor"] = cursor
                page = request(
                    client,
                    "GET",
                    f"/batches/{batch_id}/results",
                    what=f"read results of batch {batch_id}",
                    max_retries=self.max_retries,
                    params=query,
                ).json()
                rows = [wire.parse_row(row) for row in page.get("data") or []]
                frames.append(rows_frame(rows, batch_id))
                cursor = page.get("next_cursor")
                if not page.get("has_more") or not cursor:
                    break
        return pl.concat(frames)


def _total(batch: dict[str, Any]) -> int | None:
    """A listed batch's request count; None while it is not counted yet (validating)."""
    total = int((batch.get("request_counts") or {}).get("total") or 0)
    return total or None
