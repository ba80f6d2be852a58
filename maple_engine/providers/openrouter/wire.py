"""The inline-requests batch dialect, and OpenRouter as its first profile: where the calls go,
how a batch is sent (its requests inline in the create's JSON body), how a batch and its
result rows read. The request bodies and the answers are OpenAI's chat completions
(`maple_engine.providers.openai.wire`).

What OpenRouter documents, and this module holds:

- https://openrouter.ai/docs/guides/features/batch-api: ``POST /api/v1/batches`` with
  ``model``, ``endpoint`` and ``requests`` (each ``{custom_id, body}``), answered ``202`` with
  ``status: "validating"``; up to 5,000 requests and 200 MB a batch, one model and one endpoint
  a batch; typically 50% of the model's synchronous per-token price; a completed batch can hold
  failed requests (each result has a ``response`` or an ``error``).
- https://openrouter.ai/docs/batch-quickstart: the Batch API is text-only: a request carrying
  image, audio, video or file content parts is rejected.
- https://openrouter.ai/docs/client-sdks/go/models/components/batchsubmitbody: the submit body
  is read as a stream, so ``callback_url`` "must appear before ``requests``"; the batch's own
  fields (``endpoint``, ``model``) come first the same way, else the create answers 400. The
  body carries no metadata.
- https://openrouter.ai/docs/client-sdks/python/components/batchobjectstatus: the statuses
  (`STATUSES`), OpenAI's words.
- https://openrouter.ai/docs/client-sdks/python/components/batchobject: a batch's
  ``created_at`` (epoch seconds), ``finalized_at``, ``request_counts`` ``{total, completed,
  failed}`` and ``error.message``.
- https://openrouter.ai/docs/api/api-reference/batch/get-batch-results: ``GET
  /batches/{id}/results`` pages a finished batch's rows by cursor (``cursor``, answered with
  ``next_cursor`` and ``has_more``), each ``{id, custom_id, response: {status_code,
  request_id, body}, error}``; pages are kept for the 30-day artifact retention window.
- https://openrouter.ai/docs/api/api-reference/batch/list-batches: the listing is newest first,
  paged by ``after`` (the previous page's ``last_id``).
- https://openrouter.ai/docs/api/api-reference/batch/cancel-a-batch: ``POST
  /batches/{id}/cancel``; a batch with a final status answers ``409``, and a cancelled batch
  returns no result rows.

``OPENROUTER_BASE_URL`` is the part before ``/batches`` and ``/chat/completions`` (default
`DEFAULT_BASE_URL`); the key (``OPENROUTER_API_KEY``) is a bearer token.
"""

from collections.abc import Iterator
from typing import Any

import orjson
import polars as pl

from maple_engine.failures import classify_http, classify_line_error
from maple_engine.model import ENDED_STATES, BatchState
from maple_engine.providers.base import BATCH_FILE_LIMITS, ProviderLimits, json_literal
from maple_engine.providers.batch_api import wrapped_bytes_expr, wrapped_requests
from maple_engine.providers.lost import LOST
from maple_engine.providers.openai import wire as openai_wire

CREDENTIALS = "openrouter"  # OPENROUTER_API_KEY, OPENROUTER_BASE_URL
DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
CHAT_ENDPOINT = "/v1/chat/completions"
#: 5,000 requests a batch; a body up to the same 200 MB as an OpenAI batch file
LIMITS = ProviderLimits(max_requests=5_000, max_bytes=BATCH_FILE_LIMITS.max_bytes)
#: how long a finished batch's result pages are kept (the 30-day artifact retention window)
RESULTS_RETENTION_S = 30 * 86_400
#: the statuses (OpenAI's words), read case-blind
STATUSES = frozenset(
    {
        "validating",
        "in_progress",
        "finalizing",
        "completed",
        "failed",
        "expired",
        "cancelling",
        "cancelled",
    }
)
# A request of the create body is ``{"custom_id":"...","body":{...}}``.
ITEM_HEAD = '{"custom_id":'
ITEM_MID = ',"body":'
#: rows whose items are joined into one chunk of the streamed create body
CHUNK_ROWS = 500


def api_url(base_url: str | None) -> str:
    """The prefix of every path: the part before ``/batches``."""
    return (base_url or DEFAULT_BASE_URL).rstrip("/")


class CreateBody:
    """The batch create's JSON body, streamed in chunks of `CHUNK_ROWS` requests: ``endpoint``
    and ``model`` first, then ``requests`` (OpenRouter reads the body as a stream and answers
    400 otherwise). Iterable more than once, so a create sent again streams it again; its
    ``length`` is known before it is made (sent as ``content-length``, not chunked)."""

    def __init__(self, endpoint: str, model: str, requests: pl.DataFrame) -> None:
        self.head = (
            '{"endpoint":' + json_literal(endpoint) + ',"model":' + json_literal(model)
        ).encode() + b',"requests":['
        self.requests = requests

    @property
    def length(self) -> int:
        """The body's size in bytes."""
        items = wrapped_bytes_expr(pl.col("custom_id"), pl.col("request"), ITEM_HEAD, ITEM_MID)
        listed = int(self.requests.select(items.sum()).item() or 0)  # each with a separator
        return len(self.head) + listed - (1 if self.requests.height else 0) + len(b"]}")

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        for start in range(0, self.requests.height, CHUNK_ROWS):
            items = wrapped_requests(self.requests.slice(start, CHUNK_ROWS), ITEM_HEAD, ITEM_MID)
            yield (("," if start else "") + ",".join(items)).encode()
        yield b"]}"


def batch_state(batch: dict[str, Any]) -> BatchState:
    """A batch object as the engine's `BatchState` (an unknown status is still running)."""
    raw = str(batch.get("status") or "").lower()
    status = raw if raw in STATUSES or raw == LOST else "in_progress"
    counts = batch.get("request_counts") or {}
    error = batch.get("error")
    message = str(error.get("message") or "") if isinstance(error, dict) else ""
    return BatchState(
        batch_id=str(batch["id"]),
        status=status,
        ended=status in ENDED_STATES,
        errors=(message,) if message else (),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        total=int(counts.get("total") or 0),
        times=tuple(
            (phase, float(batch[key]))
            for phase, key in (("created", "created_at"), ("ended", "finalized_at"))
            if batch.get(key)
        ),
    )


def parse_row(row: dict[str, Any]) -> dict[str, Any]:
    """One result row (``{custom_id, response, error}``) as a result row of the engine: a
    success only with a 2xx response."""
    custom_id = row.get("custom_id")
    response = row.get("response")
    error = row.get("error")
    if not isinstance(response, dict):
        detail = error if isinstance(error, dict) else {"message": str(error or "no response")}
        code = detail.get("code") or detail.get("type")
        return openai_wire.failed_row(
            custom_id, classify_line_error(code), detail.get("message") or code
        )
    body = response.get("body")
    body = orjson.loads(body) if isinstance(body, str | bytes) else body or {}
    status = int(response.get("status_code") or 0)
    if error is not None or not 200 <= status < 300:
        nested = body.get("error") if isinstance(body, dict) else None
        detail = nested if isinstance(nested, dict) else (error if isinstance(error, dict) else {})
        code = detail.get("code")
        cls = classify_http(status, str(code) if code is not None else None, detail.get("type"))
        return openai_wire.failed_row(custom_id, cls, detail.get("message") or f"HTTP {status}")
    return openai_wire.parse_reply(custom_id, body)
