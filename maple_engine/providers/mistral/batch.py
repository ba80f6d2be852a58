"""``--provider mistral``: Mistral's batch API, on the OpenAI batch provider's upload, poll,
download and parse, with Mistral's own jobs (`maple_engine.providers.mistral.wire`).

The input file goes up by ``POST /v1/files`` (``purpose=batch``), as OpenAI's; the job is
``POST /v1/batch/jobs {input_files, model, endpoint, metadata, timeout_hours}``, polled at
``/v1/batch/jobs/{id}`` and listed newest first by page number; its ``output_file`` and
``error_file`` hold the result lines. A job created just before a crash is found again by its
metadata (``find_orphans``), as OpenAI's batches are. An embedding job's lines go to
``/v1/embeddings`` in Mistral's own body (`wire.body_expr`: ``output_dimension``, float vectors).
"""

from typing import Any, ClassVar

import polars as pl
from pydantic import Field

from maple_engine.model import CHAT, EMBEDDING, BatchState, Submission
from maple_engine.providers.base import (
    Dialect,
    ProviderCapabilities,
    RequestSpec,
    ShardPayload,
    json_literal,
)
from maple_engine.providers.batch_api import BatchCollection, jsonl, wrapped_bytes_expr
from maple_engine.providers.mistral import wire
from maple_engine.providers.openai import params as openai_params
from maple_engine.providers.openai.batch import OpenAIBatchProvider

NAME = "mistral"
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=wire.LIMITS,
    dialect=Dialect.OPENAI,
    rules=openai_params.RULES,
    price_families=("mistral",),
    orphans="batch-metadata",
    kinds=frozenset({CHAT, EMBEDDING}),
    models=wire.MODELS,
    realtime_twin="mistral-realtime",
    credentials=wire.CREDENTIALS,
    completion_windows=wire.WINDOWS,
    # Batch results are downloadable for 24 hours only (known limitations,
    # https://docs.mistral.ai/resources/known-limitations).
    results_retention_s=24 * 3600,
)


class MistralBatchProvider(OpenAIBatchProvider):
    """Mistral's ``/v1/files`` and ``/v1/batch/jobs``: one job per shard attempt."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    default_base_url: ClassVar[str | None] = wire.DEFAULT_BASE_URL

    name: str = Field(default=NAME, description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"API key (the code location: {wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description="The API's host, the part before /v1 (MISTRAL_BASE_URL); default: "
        f"{wire.DEFAULT_BASE_URL}.",
    )
    endpoint: str = Field(default=wire.CHAT_ENDPOINT, description="The jobs' endpoint (chat).")
    embeddings_endpoint: str = Field(
        default=wire.EMBEDDINGS_ENDPOINT, description="The endpoint of embedding jobs."
    )
    completion_window: str = Field(
        default=wire.WINDOWS[0], description="How long a job may run (its timeout_hours)."
    )
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Provider limit: requests per job."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes, description="Provider limit: bytes per file."
    )

    def resolved_base_url(self) -> str:
        return wire.api_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return wire.bearer(self.api_key)

    def check_credentials(self) -> None:
        wire.timeout_hours(self.completion_window)
        super().check_credentials()

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return wire.body_expr(spec, user, image)

    def _line_prefix(self, endpoint: str) -> tuple[str, str]:
        return wire.LINE_HEAD, wire.LINE_MID

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return wrapped_bytes_expr(custom_id, request, wire.LINE_HEAD, wire.LINE_MID)

    def encode(self, requests: pl.DataFrame) -> bytes:
        return jsonl(requests, wire.LINE_HEAD, wire.LINE_MID)

    # -- jobs -------------------------------------------------------------------------------
    def _create_json(self, payload: ShardPayload, file_id: str, digest: str) -> dict[str, Any]:
        return {
            "input_files": [file_id],
            "model": payload.model,
            "endpoint": self._endpoint(payload.requests),
            "metadata": payload.metadata(digest),
            "timeout_hours": wire.timeout_hours(self.completion_window),
        }

    def _files_query(self, file_name: str) -> dict[str, Any]:
        """Mistral's file listing searches by name (``search``) and pages by number."""
        return {"purpose": self.file_purpose, "search": file_name, "page_size": 100}

    def _batches(self) -> BatchCollection:
        return BatchCollection("/batch/jobs", "batch job", "page", self.max_retries, numbered=True)

    def _state(self, batch: dict[str, Any]) -> BatchState:
        return wire.job_state(batch)

    def _job_filter(self, job: str) -> dict[str, Any]:
        """Mistral lists the jobs whose metadata holds these pairs (each still checked)."""
        return {"metadata": json_literal({"maple_job": job})}

    def _orphan(self, job: str, batch: dict[str, Any]) -> Submission | None:
        meta = batch.get("metadata") or {}
        if meta.get("maple_job") != job or str(batch.get("status")).upper() == "FAILED":
            return None
        files = batch.get("input_files") or [None]
        return Submission(
            provider=self.name,
            job=job,
            shard=str(meta.get("maple_shard", "")),
            attempt=int(meta.get("maple_attempt", "0")),
            batch_id=str(batch["id"]),
            request_count=int(batch.get("total_requests") or 0),
            content_hash=str(meta.get("maple_hash", "")),
            submitted_at=str(batch.get("created_at", "")),
            file_id=files[0],
            adopted=True,
        )

    # -- results ----------------------------------------------------------------------------
    def _result_files(self, batch: dict[str, Any]) -> list[tuple[str, str]]:
        keys = ("output_file", "error_file")
        return [(key, str(batch[key])) for key in keys if batch.get(key)]

    @staticmethod
    def _parse_line(line: dict[str, Any]) -> dict[str, Any]:
        return wire.parse_line(line)
