"""Anthropic Message Batches HTTP endpoints, and the route table of every Anthropic endpoint."""

import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.anthropic import admin, realtime
from emulator.anthropic import batches as anthropic_batches
from emulator.anthropic.batches import AnthropicBatch
from emulator.anthropic.engine import DEFAULT_VERSION, version_problem
from emulator.core.faults import bytes_key
from emulator.core.http_common import (
    DiskFileResponse,
    anthropic_error,
    anthropic_json,
    api_key_of,
    check_auth,
    control_fault,
    read_json,
    state_of,
)
from emulator.core.outcome import new_id
from emulator.core.prompt_cache import organisation
from emulator.core.queue_limits import anthropic_refusal


async def _guard(request: Request) -> Response | None:
    return check_auth(request) or control_fault(request)


def _base_url(request: Request) -> str:
    return str(request.base_url)


def _batch_or_404(request: Request, batch_id: str) -> AnthropicBatch | Response:
    """The batch ``batch_id`` if it is in the workspace of the request's key (Anthropic scopes
    batches to workspaces)."""
    batch = state_of(request).anthropic_batches.get(batch_id)
    if batch is None or not _same_workspace(request, batch):
        return anthropic_error(404, f"Message batch {batch_id} not found")
    return batch  # type: ignore[no-any-return]


def _same_workspace(request: Request, batch: AnthropicBatch) -> bool:
    workspace = state_of(request).billing.workspace_of
    return workspace(api_key_of(request)) == workspace(batch.api_key)


async def create_batch(request: Request) -> Response:
    """``POST /v1/messages/batches``: validated at once (400), processed lazily."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    limit = state.config.anthropic_max_bytes
    if int(request.headers.get("content-length") or 0) > limit:
        return anthropic_error(
            413, f"Request exceeds the maximum allowed size of {limit // (1024 * 1024)} MB"
        )
    payload, bad = await read_json(request)
    if bad is not None:
        return bad
    version = request.headers.get("anthropic-version", DEFAULT_VERSION)
    problem = version_problem(version) or await run_in_threadpool(
        anthropic_batches.check_requests, payload, state.config.anthropic_max_requests, version
    )
    if problem is not None:
        return anthropic_error(400, problem)
    requests: list[dict[str, Any]] = payload["requests"]
    drawer = state.drawer
    expire = False
    if "expired" in drawer.rates:
        key = bytes_key(await request.body())
        expire = drawer.hit("expired", key, drawer.next_attempt(key))
    batch = AnthropicBatch(
        id=new_id("msgbatch_"),
        created=time.time(),
        seconds=state.durations.draw(len(requests)),
        expire=expire,
        requests=requests,
        total=len(requests),
        api_key=api_key_of(request),
        org=organisation(request.headers),
    )
    with state.lock:
        full = anthropic_refusal(state, batch.total, batch.created)
        if full is None:
            state.anthropic_batches[batch.id] = batch
    if full is not None:
        return anthropic_error(429, full, {"retry-after": "1"})
    state.stats.add("batches_created")
    end = batch.created + batch.seconds
    state.finisher.schedule(end, lambda: anthropic_batches.advance(state, batch, time.time()))
    return anthropic_json(anthropic_batches.batch_json(batch, batch.created, _base_url(request)))


async def get_batch(request: Request) -> Response:
    """``GET /v1/messages/batches/{batch_id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    state.stats.add("batch_retrievals")
    return anthropic_json(
        await run_in_threadpool(anthropic_batches.observe, state, batch, _base_url(request))
    )


def _limit(request: Request) -> int | Response:
    raw = request.query_params.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        return anthropic_error(400, "limit: Input should be an integer between 1 and 1000")
    return int(raw)


async def list_batches(request: Request) -> Response:
    """``GET /v1/messages/batches``: newest first, ``after_id``/``before_id`` cursors."""
    if (refused := await _guard(request)) is not None:
        return refused
    limit = _limit(request)
    if isinstance(limit, Response):
        return limit
    state = state_of(request)
    state.stats.add("batch_list_pages")
    batches = [b for b in reversed(state.anthropic_batches.values()) if _same_workspace(request, b)]
    ids = [batch.id for batch in batches]
    after, before = request.query_params.get("after_id"), request.query_params.get("before_id")
    if before:
        stop = ids.index(before) if before in ids else 0
        start = max(0, stop - limit)
        window, has_more = batches[start:stop], start > 0
    else:
        start = (ids.index(after) + 1 if after in ids else len(ids)) if after else 0
        window, has_more = batches[start : start + limit], start + limit < len(batches)
    base = _base_url(request)
    data = [await run_in_threadpool(anthropic_batches.observe, state, b, base) for b in window]
    return anthropic_json(
        {
            "data": data,
            "has_more": has_more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )


async def cancel_batch(request: Request) -> Response:
    """``POST /v1/messages/batches/{batch_id}/cancel``: ``canceling``, then ``ended``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    base = _base_url(request)
    view = await run_in_threadpool(anthropic_batches.observe, state, batch, base)
    if view["processing_status"] != "ended":
        with batch.lock:
            if batch.cancel_at is None:
                batch.cancel_at = time.time()
        settle = batch.cancel_at + 0.1 * batch.seconds
        state.finisher.schedule(
            settle, lambda: anthropic_batches.advance(state, batch, time.time())
        )
        view = anthropic_batches.batch_json(batch, time.time(), base)
    return anthropic_json(view)


async def batch_results(request: Request) -> Response:
    """``GET /v1/messages/batches/{batch_id}/results``: the results JSONL, once ended."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    await run_in_threadpool(anthropic_batches.observe, state, batch, _base_url(request))
    if batch.ended is None:
        return anthropic_error(
            400,
            f"Message batch {batch.id} is still being processed; results are not available yet.",
        )
    headers = {"request-id": new_id("req_")}
    return DiskFileResponse(
        batch.ended.results_path, media_type="application/binary", headers=headers
    )


async def delete_batch(request: Request) -> Response:
    """``DELETE /v1/messages/batches/{batch_id}``: only once processing has ended."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    await run_in_threadpool(anthropic_batches.observe, state, batch, _base_url(request))
    if batch.ended is None:
        return anthropic_error(
            400, "Message batches can only be deleted once processing has ended; cancel it first."
        )
    with state.lock:
        state.anthropic_batches.pop(batch.id, None)
    return anthropic_json({"id": batch.id, "type": "message_batch_deleted"})


#: Anthropic's routes: Messages, Message Batches and the admin reports.
ROUTES = [
    *admin.ADMIN_ROUTES,
    Route("/v1/messages", realtime.anthropic_messages, methods=["POST"]),
    Route("/v1/messages/batches", create_batch, methods=["POST"]),
    Route("/v1/messages/batches", list_batches, methods=["GET"]),
    Route("/v1/messages/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/v1/messages/batches/{batch_id}", delete_batch, methods=["DELETE"]),
    Route("/v1/messages/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
    Route("/v1/messages/batches/{batch_id}/results", batch_results, methods=["GET"]),
]
