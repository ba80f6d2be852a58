"""Gemini real time: ``POST /v1beta/models/{model}:generateContent``, one request per row; an
embedding job's rows go several to a ``:batchEmbedContents`` request (up to 100 texts).

The same engine as the other real-time providers (pacing, adaptive concurrency, retries,
checkpoints). Gemini puts the model in the URL, not the body, so each shard attempt runs on a
copy of the resource bound to the payload's model.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field

from maple_engine.failures import FailureClass
from maple_engine.model import BATCH_PRICED_PREFIX, CHAT, EMBEDDING, PRIORITY_PREFIX
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.gemini import params
from maple_engine.providers.gemini.api import retry_wait
from maple_engine.providers.gemini.file_parts import FILES
from maple_engine.providers.gemini.user_files import user_file
from maple_engine.providers.gemini.wire import (
    API_VERSION,
    CACHING,
    EMBED_HEAD,
    INPUT_LIMITS,
    MAX_TEXTS_PER_REQUEST,
    MODELS,
    classify_status,
    file_gone,
    gemini_api_key,
    gemini_base_url,
    gemini_body_expr,
    model_path,
    parse_embeddings,
    parse_generate_response,
)
from maple_engine.providers.http import error_detail
from maple_engine.providers.realtime import (
    Group,
    RealtimeProvider,
    Row,
    off_tier,
    on_tier,
    realtime_capabilities,
)

FLEX = "flex"
PRIORITY = "priority"
#: the tier a Gemini answer was served on (https://ai.google.dev/gemini-api/docs/priority-inference:
#: a priority request over the project's priority limit is served, and billed, at ``standard``)
SERVED_TIER_HEADER = "x-gemini-service-tier"


class GeminiRealtimeProvider(RealtimeProvider):
    """Gemini ``generateContent``, one request per row (real-time prices); embeddings through
    ``batchEmbedContents``, several rows a request."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        realtime_capabilities(
            Dialect.GEMINI,
            "google",
            "gemini",
            caching=CACHING,
            kinds=frozenset({CHAT, EMBEDDING}),
            models=MODELS,
            rules=params.RULES,
        ),
        input_limits=INPUT_LIMITS,
        files=FILES,
    )

    #: the ``serviceTier`` every request goes on (flex, priority), whoever encoded it; None:
    #: standard
    service_tier: ClassVar[str | None] = None

    name: str = Field(default="gemini-realtime", description="Provider name in costs/output.")
    model: str | None = Field(
        default=None, description="Model in the URL; set from each shard's payload when None."
    )
    inputs_per_request: int = Field(
        default=MAX_TEXTS_PER_REQUEST,
        ge=1,
        le=MAX_TEXTS_PER_REQUEST,
        description="Embedding jobs: most rows' texts in one batchEmbedContents request.",
    )

    def endpoint(self) -> str:
        return f"/{API_VERSION}/{model_path(self.model or '')}:generateContent"

    def resolved_base_url(self) -> str:
        return gemini_base_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": gemini_api_key(self.api_key)}

    def upload_user_file(self, digest: str, file: AttachedFile) -> UploadedFile:
        """``file`` uploaded by the Files API for ``fileData`` parts (`user_files.user_file`)."""
        with self.control_client() as client:
            return user_file(client, digest, file, self.max_attempts)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return gemini_body_expr(spec, user, image, service_tier=self.service_tier, files=files)

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return parse_generate_response(custom_id, body)

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """Chat rows one per request; embedding rows up to ``inputs_per_request`` per
        ``batchEmbedContents`` request, each ``EmbedContentRequest`` naming the model. On a
        tier, chat rows go on it, whoever encoded them (a batch's rows under a deadline)."""
        if self.service_tier is not None:
            return super().requests_of(on_tier(rows, "serviceTier", self.service_tier))
        if not rows or not rows[0][1].startswith(EMBED_HEAD):
            return super().requests_of(rows)
        model = model_path(self.model or "")
        named = '{"model":' + orjson.dumps(model).decode() + ","
        step = self.inputs_per_request
        groups: list[Group] = []
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            bodies = ",".join(named + body[1:] for _, body in chunk)
            groups.append((tuple(c for c, _ in chunk), '{"requests":[' + bodies + "]}"))
        return f"/{API_VERSION}/{model}:batchEmbedContents", groups

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        if "embeddings" in body:
            return parse_embeddings(custom_ids, body)
        return super().parse_group(custom_ids, body)

    def retry_wait(self, response: httpx.Response) -> float | None:
        return retry_wait(response)

    def served_tier(self, headers: Mapping[str, str]) -> str | None:
        """The tier the answer says it was served on (``x-gemini-service-tier``)."""
        return headers.get(SERVED_TIER_HEADER)

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        message, _, _ = error_detail(response)
        status = _error_status(response)
        if status is None:
            return FailureClass.SERVER_ERROR.value, message
        return classify_status({"code": response.status_code, **status}), message

    def forbidden_row(self, response: httpx.Response) -> tuple[str, str] | None:
        status = _error_status(response)
        if status is None or not file_gone(status):
            return None
        return FailureClass.INVALID_FILE.value, str(status.get("message"))

    def bound_to(self, model: str) -> "GeminiRealtimeProvider":
        """A copy that names ``model`` in its URL (the model of each shard's payload)."""
        return self if self.model == model else self.model_copy(update={"model": model})


class GeminiFlexProvider(GeminiRealtimeProvider):
    """Gemini ``generateContent`` on the flex tier (``"serviceTier": "flex"``, in preview): one
    request per row, at half the standard price (the batch rates), slower and best-effort; a
    429 ``RESOURCE_EXHAUSTED`` when flex has no capacity is retried with backoff."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        GeminiRealtimeProvider.capabilities,
        batch_prices=True,
        kinds=frozenset({CHAT}),  # the flex tier serves generateContent only
    )
    batch_id_prefix: ClassVar[str] = BATCH_PRICED_PREFIX
    service_tier: ClassVar[str | None] = FLEX

    name: str = Field(default="gemini-flex", description="Provider name in costs/output.")
    timeout_s: float = Field(
        default=900.0, description="HTTP timeout per request, seconds (flex takes minutes)."
    )
    max_attempts: int = Field(
        default=12, description="Sends per request within one attempt (flex 429s, 5xx, timeouts)."
    )

    def shed_fallback(self, body: str) -> str | None:
        """A request flex shed until its sends ran out goes to standard real time (the same
        ``generateContent`` without ``serviceTier``), billed at the standard price."""
        return off_tier(body, "serviceTier")


class GeminiPriorityProvider(GeminiRealtimeProvider):
    """Gemini ``generateContent`` on the priority tier (``"serviceTier": "priority"``, Tier 2
    and 3 projects, https://ai.google.dev/gemini-api/docs/priority-inference): one request per
    row, served before standard and flex traffic at a premium (the price file's
    ``priority_multiple``, 2x standard unless it says otherwise). Over the project's priority
    limit a request is served at standard instead, and says so only in the
    ``x-gemini-service-tier`` header: that row is billed at the standard price."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        GeminiRealtimeProvider.capabilities,
        kinds=frozenset({CHAT}),  # the priority tier serves generateContent only
    )
    batch_id_prefix: ClassVar[str] = PRIORITY_PREFIX
    service_tier: ClassVar[str | None] = PRIORITY

    name: str = Field(default="gemini-priority", description="Provider name in costs/output.")


def _error_status(response: httpx.Response) -> dict[str, Any] | None:
    """The ``google.rpc.Status`` of an error answer (None: its body is not one)."""
    try:
        return orjson.loads(response.content).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None
