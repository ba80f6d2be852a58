"""OpenAI Batch API provider (files + batches), for any OpenAI-compatible base URL."""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import httpx
import polars as pl
from pydantic import Field

from resources.crashpoints import crash_point
from resources.errors import ConfigError
from resources.failures import FailureClass, classify_http, classify_line_error
from resources.http import make_client, request
from resources.providers.base import (
    ENDED_STATES,
    BatchState,
    ProviderLimits,
    RequestSpec,
    ShardPayload,
    Submission,
    json_literal,
    json_string_expr,
    now_iso,
    poll_batches,
    result_frame,
    splice_params,
    user_content_expr,
)
from resources.providers.lost import LOST, fetch_or_lost, ignore_missing
from resources.providers.openai_lines import parse_result_file

DEFAULT_BASE_URL = "https://api.openai.com/v1"
IMAGE_PART = '{"type":"image_url","image_url":{"url":{url}}}'
LIST_PAGE = 100


class OpenAIBatchProvider(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Runs shards through the OpenAI Batch API: upload JSONL, create, poll, download, parse."""

    name: str = Field(default="openai", description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, description="API key; defaults to the OPENAI_API_KEY environment variable."
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL ending in /v1; defaults to OPENAI_BASE_URL, else OpenAI's.",
    )
    endpoint: str = Field(default="/v1/chat/completions", description="Batch endpoint.")
    completion_window: str = Field(default="24h", description="Batch completion window.")
    timeout_s: float = Field(default=120.0, description="HTTP timeout per call, seconds.")
    max_retries: int = Field(default=6, description="Retries of a control call on 429/5xx.")
    max_requests: int = Field(default=50_000, description="Provider limit: requests per batch.")
    max_bytes: int = Field(default=200_000_000, description="Provider limit: bytes per file.")

    @property
    def provider_name(self) -> str:
        return self.name

    def limits(self) -> ProviderLimits:
        return ProviderLimits(self.max_requests, self.max_bytes)

    def resolved_base_url(self) -> str:
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    def check_credentials(self) -> None:
        if not (self.api_key or os.environ.get("OPENAI_API_KEY")):
            raise ConfigError(
                "OPENAI_API_KEY is not set: export it (or pass api_key to the provider "
                "resource), or use --provider emulator to try the platform without a key."
            )

    def _client(self) -> httpx.Client:
        self.check_credentials()
        key = self.api_key or os.environ.get("OPENAI_API_KEY", "")
        return make_client(
            self.resolved_base_url(), {"Authorization": f"Bearer {key}"}, self.timeout_s
        )

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(self, spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
        head: dict[str, Any] = {"model": spec.model, **spec.params}
        if spec.response_schema is not None:
            head["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": spec.schema_name,
                    "schema": spec.response_schema,
                    "strict": True,
                },
            }
        system = (
            '{"role":"system","content":' + json_literal(spec.system) + "},"
            if spec.system is not None
            else ""
        )
        body = pl.concat_str(
            [
                pl.lit('{"messages":[' + system + '{"role":"user","content":'),
                user_content_expr(user, image, IMAGE_PART),
                pl.lit("}]}"),
            ]
        )
        return splice_params(body, head)

    def _line_prefix(self) -> tuple[str, str]:
        return '{"custom_id":', ',"method":"POST","url":' + json_literal(self.endpoint) + ',"body":'

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        head, mid = self._line_prefix()
        fixed = len(head) + len(mid) + 1 + 1  # closing brace and newline
        return json_string_expr(custom_id).str.len_bytes() + request.str.len_bytes() + fixed

    def encode(self, requests: pl.DataFrame) -> bytes:
        head, mid = self._line_prefix()
        lines = requests.select(
            pl.concat_str(
                [
                    pl.lit(head),
                    json_string_expr(pl.col("custom_id")),
                    pl.lit(mid),
                    pl.col("request"),
                    pl.lit("}"),
                ]
            )
        ).to_series()
        return ("\n".join(lines.to_list()) + "\n").encode()

    # -- lifecycle --------------------------------------------------------------------------
    def submit(self, payload: ShardPayload) -> Submission:
        data, digest = payload.encoded(self.encode)
        what = f"job {payload.job} shard {payload.shard} attempt {payload.attempt}"
        with self._client() as client:
            upload = request(
                client,
                "POST",
                "/files",
                what=f"upload {what}",
                max_retries=self.max_retries,
                files={
                    "file": (f"{payload.shard}-{payload.attempt}.jsonl", data, "application/jsonl")
                },
                data={"purpose": "batch"},
            )
            file_id = str(upload.json()["id"])
            crash_point("after_upload")
            created = request(
                client,
                "POST",
                "/batches",
                what=f"create batch for {what}",
                max_retries=self.max_retries,
                json={
                    "input_file_id": file_id,
                    "endpoint": self.endpoint,
                    "completion_window": self.completion_window,
                    "metadata": payload.metadata(digest),
                },
            )
        return Submission(
            provider=self.name,
            job=payload.job,
            shard=payload.shard,
            attempt=payload.attempt,
            batch_id=str(created.json()["id"]),
            request_count=payload.requests.height,
            content_hash=digest,
            submitted_at=now_iso(),
            file_id=file_id,
        )

    def _state(self, batch: dict[str, Any]) -> BatchState:
        errors = (batch.get("errors") or {}).get("data") or []
        counts = batch.get("request_counts") or {}
        return BatchState(
            batch_id=str(batch["id"]),
            status=str(batch["status"]),
            ended=batch["status"] in ENDED_STATES,
            errors=tuple(str(e.get("message", "")) for e in errors),
            error_codes=tuple(str(e.get("code", "")) for e in errors),
            completed=int(counts.get("completed", 0)),
            failed=int(counts.get("failed", 0)),
            total=int(counts.get("total", 0)),
        )

    def _list_batches(self, client: httpx.Client) -> Iterator[dict[str, Any]]:
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": LIST_PAGE}
            if after:
                params["after"] = after
            page = request(
                client,
                "GET",
                "/batches",
                what="list batches",
                params=params,
                max_retries=self.max_retries,
            ).json()
            yield from page["data"]
            if not page.get("has_more") or not page["data"]:
                return
            after = page["data"][-1]["id"]

    def _get(self, client: httpx.Client, batch_id: str) -> dict[str, Any]:
        got = request(
            client,
            "GET",
            f"/batches/{batch_id}",
            what=f"poll batch {batch_id}",
            max_retries=self.max_retries,
        )
        return dict(got.json())

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        with self._client() as client:
            return poll_batches(
                {s.batch_id for s in submissions},
                lambda: self._list_batches(client),
                lambda batch_id: fetch_or_lost(
                    lambda b: self._get(client, b), lambda: self._list_batches(client), batch_id
                ),
                self._state,
            )

    def cancel(self, submission: Submission) -> None:
        with self._client() as client:
            ignore_missing(
                lambda: request(
                    client,
                    "POST",
                    f"/batches/{submission.batch_id}/cancel",
                    what=f"cancel batch {submission.batch_id}",
                    max_retries=self.max_retries,
                )
            )

    def find_orphans(self, job: str) -> list[Submission]:
        found: list[Submission] = []
        with self._client() as client:
            for batch in self._list_batches(client):
                meta = batch.get("metadata") or {}
                if meta.get("maple_job") != job or batch.get("status") in {"failed"}:
                    continue
                found.append(
                    Submission(
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
                )
        return found

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        if state.status == LOST:  # no result lines: every row is unrun and sent again
            return result_frame({})
        with self._client() as client:
            got = request(
                client,
                "GET",
                f"/batches/{submission.batch_id}",
                what=f"fetch batch {submission.batch_id}",
                max_retries=self.max_retries,
            )
            batch = got.json()
            frames = [result_frame({})]
            for key in ("output_file_id", "error_file_id"):
                file_id = batch.get(key)
                if file_id:
                    content = request(
                        client,
                        "GET",
                        f"/files/{file_id}/content",
                        what=f"download {key} of batch {submission.batch_id}",
                        max_retries=self.max_retries,
                    ).content
                    frames.append(parse_result_file(content, submission.batch_id, _parse_line))
                    crash_point("mid_download")
        return pl.concat(frames)


def _parse_line(line: dict[str, Any]) -> dict[str, Any]:
    """One output/error JSONL line -> a result row (success only with a 2xx response)."""
    custom_id = line.get("custom_id")
    response = line.get("response")
    error = line.get("error")
    if response is None:
        code = (error or {}).get("code")
        return _failed(custom_id, classify_line_error(code), (error or {}).get("message") or code)
    body = response.get("body") or {}
    status = int(response.get("status_code", 0))
    if error is not None or not 200 <= status < 300:
        detail = body.get("error") or error or {}
        cls = classify_http(status, detail.get("code"), detail.get("type"))
        return _failed(custom_id, cls, detail.get("message") or f"HTTP {status}")
    return parse_chat_completion(custom_id, body)


def _failed(custom_id: Any, cls: FailureClass, message: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "status": "failed",
        "failure_class": cls.value,
        "error": str(message),
        "billed": False,
    }


def parse_chat_completion(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion body -> a result row; refusals and content filters are ``refused``."""
    usage = body.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    row: dict[str, Any] = {
        "custom_id": custom_id,
        "billed": True,
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "cached_input_tokens": cached,
        "cache_write_tokens": 0,
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        reason = message.get("refusal") or "content filtered"
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=str(reason))
        return row
    row.update(status="succeeded", response=message.get("content") or "")
    return row
