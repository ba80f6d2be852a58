"""OpenRouter's Batch API (``https://openrouter.ai/api/v1/batches``), served under
``/openrouter/api/v1`` (the emulator serves every host on one port), on the OpenAI batch engine.

A batch's requests come inline in the create's JSON body; the emulator writes them as OpenAI
batch lines (the batch's endpoint and model) and runs them as an OpenAI batch, so its lifecycle,
faults, billing and the ``/_emulator/stats`` counters are OpenAI's; only the API is OpenRouter's.
What OpenRouter documents and the emulator holds a client to:

- the create body is read as a stream: ``endpoint`` and ``model`` must come before ``requests``
  (https://openrouter.ai/docs/client-sdks/go/models/components/batchsubmitbody), else 400;
- one model and one endpoint a batch, up to 5,000 requests
  (https://openrouter.ai/docs/guides/features/batch-api): 400 beyond;
- text only: a request with an image, audio, video or file part is refused
  (https://openrouter.ai/docs/batch-quickstart): 400 here, before anything runs;
- the create answers ``202`` with ``status: "validating"``; ``GET /batches/{id}`` is the batch
  (``request_counts``, ``created_at``, ``finalized_at``, ``error``, and ``results`` inline once
  it has ended), ``GET /batches`` lists them newest first (``after``, ``limit``; ``results``
  null), ``GET /batches/{id}/results`` pages a finished batch's rows by ``cursor``
  (https://openrouter.ai/docs/api/api-reference/batch/get-batch-results);
- ``POST /batches/{id}/cancel`` answers ``409`` once the batch has a final status, and a
  cancelled batch has no result rows
  (https://openrouter.ai/docs/api/api-reference/batch/cancel-a-batch).
"""

import zlib
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.core.http_common import openai_error, openai_json, read_json, state_of
from emulator.core.state import State
from emulator.openai import batches as openai_batches
from emulator.openai import realtime
from emulator.openai import routes as openai
from emulator.openai.records import OpenAIBatch

PREFIX = "/openrouter/api/v1"
ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
MAX_REQUESTS = 5_000
#: content part types that are not text (chat completions' and the Responses API's)
NOT_TEXT = frozenset(
    {"image_url", "input_image", "input_audio", "input_file", "file", "image", "document", "video"}
)
RESULTS_PAGE = 100
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


def _refusal(payload: Any) -> str | None:  # noqa: PLR0911  (one exit per rule)
    """Why OpenRouter refuses the create body ``payload`` (its keys in the order sent)."""
    if not isinstance(payload, dict):
        return "The request body must be a JSON object."
    keys = list(payload)
    if "requests" in keys and any(
        name not in keys[: keys.index("requests")] for name in ("endpoint", "model")
    ):
        return "endpoint and model must appear before requests in the request body."
    if payload.get("endpoint") not in ENDPOINTS:
        return f"endpoint must be one of {', '.join(ENDPOINTS)}."
    if not isinstance(payload.get("model"), str) or not payload["model"]:
        return "model is required."
    requests = payload.get("requests")
    if not isinstance(requests, list) or not requests:
        return "requests must be a non-empty array."
    if len(requests) > MAX_REQUESTS:
        return f"A batch takes at most {MAX_REQUESTS:,} requests, got {len(requests):,}."
    ids = [r.get("custom_id") if isinstance(r, dict) else None for r in requests]
    if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != len(ids):
        return "Each request needs a unique custom_id."
    for item in requests:
        if not isinstance(item.get("body"), dict):
            return f"Request {item['custom_id']}: body must be an object."
        part = _not_text(item["body"])
        if part is not None:
            return (
                f"Request {item['custom_id']}: the Batch API is text-only; content part "
                f"{part!r} is not supported. Send multimodal requests to the sync API."
            )
    return None


def _not_text(body: dict[str, Any]) -> str | None:
    """The type of the first content part of ``body`` that is not text, if any."""
    messages = body.get("messages") or body.get("input") or []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in NOT_TEXT:
                return str(kind)
    return None


def batch_view(state: State, batch: OpenAIBatch, *, listed: bool = False) -> dict[str, Any]:
    """The OpenRouter batch object of ``batch`` now (``results`` inline once it has ended,
    null in a listing)."""
    view = openai_batches.observe(state, batch)
    status = view["status"]
    errors = (view.get("errors") or {}).get("data") or []
    final = batch.final
    usage = view.get("usage") or {}
    ended = status in ENDED
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "model": state.openrouter_batches.get(batch.id),
        "completion_window": "24h",
        "status": status,
        "created_at": view["created_at"],
        "finalized_at": int(final.at) if final is not None else None,
        # the requests came inline: counted from the create on
        "request_counts": {**view["request_counts"], "total": batch.total or _count(batch)},
        "error": {"message": errors[0].get("message", "")} if errors else None,
        "usage": {
            "prompt_tokens": usage.get("input_tokens", 0),
            "completion_tokens": usage.get("output_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        }
        if usage
        else None,
        "results": None if listed or not ended else _rows(state, batch, view),
    }


def _count(batch: OpenAIBatch) -> int:
    """The batch's requests (its input's lines), before the engine has read them."""
    with batch.input_file.path.open("rb") as lines:
        return sum(1 for line in lines if line.strip())


def _rows(state: State, batch: OpenAIBatch, view: dict[str, Any]) -> list[dict[str, Any]]:
    """The ended batch's result rows: its output and error lines (none once cancelled)."""
    if view["status"] == "cancelled":
        return []
    rows: list[dict[str, Any]] = []
    for field in ("output_file_id", "error_file_id"):
        stored = state.files.get(str(view.get(field)))
        if stored is not None:
            lines = stored.path.read_bytes().splitlines()
            rows += [orjson.loads(line) for line in lines if line.strip()]
    return rows


async def _ours(request: Request) -> tuple[State, OpenAIBatch, dict[str, Any]] | Response:
    """The request's batch, advanced to now, with its OpenAI view; or the refusal (a key's,
    a control fault, 404 for a batch OpenRouter did not make)."""
    if (refused := await openai._guard(request)) is not None:
        return refused
    state = state_of(request)
    batch_id = request.path_params["batch_id"]
    if batch_id not in state.openrouter_batches:
        return openai_error(404, f"Batch {batch_id} not found.", code="not_found")
    batch = state.openai_batches[batch_id]
    return state, batch, await run_in_threadpool(openai_batches.observe, state, batch)


async def create_batch(request: Request) -> Response:
    """``POST /batches``: the inline requests as an OpenAI batch, ``202`` ``validating``."""
    if (refused := await openai._guard(request)) is not None:
        return refused
    payload, bad = await read_json(request)
    if bad is not None:
        return bad
    problem = _refusal(payload)
    if problem is not None:
        return openai_error(400, problem)
    state = state_of(request)
    endpoint, model = payload["endpoint"], payload["model"]
    lines = [
        orjson.dumps(
            {
                "custom_id": item["custom_id"],
                "method": "POST",
                "url": endpoint,
                "body": {**item["body"], "model": item["body"].get("model") or model},
            }
        )
        for item in payload["requests"]
    ]
    data = b"\n".join(lines) + b"\n"
    path = state.new_path()
    path.write_bytes(data)
    stored = state.add_file("openrouter-batch.jsonl", "batch", path, zlib.crc32(data))
    batch = openai.start_batch(request, stored, endpoint=endpoint, window="24h", metadata=None)
    with state.lock:
        state.openrouter_batches[batch.id] = model
    view = await run_in_threadpool(batch_view, state, batch, listed=True)
    return openai_json({**view, "status": "validating", "finalized_at": None}, 202)


async def get_batch(request: Request) -> Response:
    """``GET /batches/{id}``."""
    found = await _ours(request)
    if isinstance(found, Response):
        return found
    state, batch, _ = found
    return openai_json(await run_in_threadpool(batch_view, state, batch))


async def list_batches(request: Request) -> Response:
    """``GET /batches``: newest first, ``after`` the previous page's ``last_id``."""
    if (refused := await openai._guard(request)) is not None:
        return refused
    state = state_of(request)
    limit = min(max(int(request.query_params.get("limit") or 20), 1), 100)
    ids = list(reversed(state.openrouter_batches))
    after = request.query_params.get("after")
    start = ids.index(after) + 1 if after in ids else (len(ids) if after else 0)
    page = ids[start : start + limit]
    data = []
    for batch_id in page:
        batch = state.openai_batches[batch_id]
        data.append(await run_in_threadpool(batch_view, state, batch, listed=True))
    return openai_json(
        {
            "object": "list",
            "data": data,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": start + limit < len(ids),
        }
    )


async def batch_results(request: Request) -> Response:
    """``GET /batches/{id}/results``: a finished batch's rows, ``cursor`` paged."""
    found = await _ours(request)
    if isinstance(found, Response):
        return found
    state, batch, view = found
    if view["status"] not in ENDED:
        return openai_error(409, f"Batch {batch.id} has not finished (status {view['status']}).")
    rows = await run_in_threadpool(_rows, state, batch, view)
    limit = min(max(int(request.query_params.get("limit") or RESULTS_PAGE), 1), 1000)
    start = int(request.query_params.get("cursor") or 0)
    more = start + limit < len(rows)
    return openai_json(
        {
            "object": "list",
            "data": rows[start : start + limit],
            "has_more": more,
            "next_cursor": str(start + limit) if more else None,
        }
    )


async def cancel_batch(request: Request) -> Response:
    """``POST /batches/{id}/cancel``: ``409`` once the batch has a final status."""
    found = await _ours(request)
    if isinstance(found, Response):
        return found
    state, batch, view = found
    if view["status"] in ENDED:
        return openai_error(409, f"Batch {batch.id} already has a final status ({view['status']}).")
    openai.request_cancel(state, batch)
    return openai_json(await run_in_threadpool(batch_view, state, batch))


ROUTES = [
    Route(f"{PREFIX}/batches", create_batch, methods=["POST"]),
    Route(f"{PREFIX}/batches", list_batches, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id}}", get_batch, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id}}/results", batch_results, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id}}/cancel", cancel_batch, methods=["POST"]),
    Route(f"{PREFIX}/chat/completions", realtime.openai_realtime, methods=["POST"]),
]
