"""Gemini Batch API endpoints (``batchGenerateContent``, ``asyncBatchEmbedContent``) and real-time
``generateContent`` and ``batchEmbedContents``."""

import asyncio
import functools
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from emulator.core.faults import body_key, bytes_key
from emulator.core.flex import FLEX, PRIORITY, RETRY_AFTER_S
from emulator.core.http_common import JSONResponse, state_of
from emulator.core.outcome import Outcome, new_id
from emulator.core.prompt_cache import gemini_usage, organisation
from emulator.core.state import State
from emulator.gemini import batches as gb
from emulator.gemini.engine import RETRY_INFO, error_status
from emulator.gemini.file_routes import _guard, _observe, gemini_error

SERVED_TIER = "x-gemini-service-tier"
STANDARD = "standard"


def _model(request: Request) -> str:
    return "models/" + str(request.path_params["model"]).removeprefix("models/")


def _inline_requests(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | str:
    items = (config.get("requests") or {}).get("requests")
    if not isinstance(items, list) or not items:
        return "batch.input_config.requests: at least one request is required."
    requests = []
    for index, item in enumerate(items):
        request = item.get("request") if isinstance(item, dict) else None
        if not isinstance(request, dict):
            return f"batch.input_config.requests.requests[{index}].request is required."
        key = ((item.get("metadata") or {}).get("key")) or str(index)
        requests.append((str(key), request))
    return requests


def _file_requests(state: State, name: str) -> tuple[list[Any], str | None] | Response:
    stored = state.gemini.file(name, time.time())
    if stored is None:
        return gemini_error(404, f"Input file {name} not found. Upload it with the Files API.")
    return gb.read_file_requests(stored.path)


async def create_batch(request: Request) -> Response:
    """``POST /v1beta/models/{model}:batchGenerateContent`` (inline or file input)."""
    return await _create(request, "generate")


async def create_embed_batch(request: Request) -> Response:
    """``POST /v1beta/models/{model}:asyncBatchEmbedContent`` (``EmbedContentRequest`` lines,
    inline or file input)."""
    return await _create(request, gb.EMBED)


async def _create(request: Request, kind: str) -> Response:
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    raw = await request.body()
    limit = state.config.gemini_max_inline_bytes
    batch_spec = await _batch_spec(request)
    if isinstance(batch_spec, Response):
        return batch_spec
    config = batch_spec.get("inputConfig") or batch_spec.get("input_config") or {}
    error = None
    if config.get("fileName") or config.get("file_name"):
        found = await run_in_threadpool(
            _file_requests, state, str(config.get("fileName") or config.get("file_name"))
        )
        if isinstance(found, Response):
            return found
        requests, error = found
        inline = False
    else:
        if len(raw) > limit:
            return gemini_error(400, f"Request payload size exceeds the limit: {limit} bytes.")
        parsed = _inline_requests(config)
        if isinstance(parsed, str):
            return gemini_error(400, parsed)
        requests, inline = parsed, True
    return JSONResponse(
        gb.batch_json(
            _register(
                request,
                state,
                spec=batch_spec,
                requests=requests,
                inline=inline,
                error=error,
                kind=kind,
            )
        )
    )


async def _batch_spec(request: Request) -> dict[str, Any] | Response:
    """The create's ``batch`` object, or the 400 for a body that is no JSON or whose
    ``priority`` is no int64."""
    try:
        spec = (await request.json()).get("batch") or {}
    except ValueError:
        return gemini_error(400, "Invalid JSON payload received.")
    if not _int64(spec.get("priority", 0)):
        return gemini_error(
            400, f"Invalid value at 'batch.priority' (TYPE_INT64), {spec.get('priority')!r}"
        )
    return dict(spec)


def _int64(value: Any) -> bool:
    """Whether ``value`` is an int64 as JSON carries one (a number or a decimal string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.lstrip("-").isdigit()


def _register(
    request: Request,
    state: State,
    *,
    spec: dict[str, Any],
    requests: list[Any],
    inline: bool,
    error: str | None,
    kind: str,
) -> gb.GeminiBatch:
    drawer = state.drawer
    expire = False
    if "expired" in drawer.rates and requests:
        key = body_key([r for _, r in requests])
        expire = drawer.hit("expired", key, drawer.next_attempt(key))
    batch = gb.GeminiBatch(
        priority=int(spec.get("priority") or 0),
        name=f"batches/{new_id('')[:16].lower()}",
        model=_model(request),
        display_name=str(spec.get("displayName") or spec.get("display_name") or ""),
        created=time.time(),
        seconds=state.durations.draw(len(requests)),
        expire=expire,
        inline=inline,
        requests=requests or None,
        total=len(requests),
        org=gemini_organisation(request),
        error=error,
        kind=kind,
    )
    with state.gemini.lock:
        state.gemini.batches[batch.name] = batch
    state.stats.add("batches_created")
    _start_waiting(state)
    return batch


def _start_waiting(state: State) -> None:
    """Start the waiting batches that have a slot now (``gemini_batch_slots``; every one
    without a limit), highest ``batch.priority`` first."""
    with state.gemini.lock:
        starting = gb.next_to_start(
            list(state.gemini.batches.values()), state.config.gemini_batch_slots
        )
        now = time.time()
        for batch in starting:
            batch.started = batch.created if state.config.gemini_batch_slots is None else now
    for batch in starting:
        end = (batch.started or now) + batch.seconds
        state.finisher.schedule(end, functools.partial(_advance, state, batch))


def _advance(state: State, batch: gb.GeminiBatch) -> None:
    _observe(state, batch)
    if batch.ended_at is not None:
        _start_waiting(state)


def _batch_or_404(request: Request) -> gb.GeminiBatch | Response:
    name = "batches/" + request.path_params["batch_id"]
    batch = state_of(request).gemini.batches.get(name)
    return batch if batch is not None else gemini_error(404, f"Batch {name} not found.")


async def get_batch(request: Request) -> Response:
    """``GET /v1beta/batches/{id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    batch = _batch_or_404(request)
    if isinstance(batch, Response):
        return batch
    return JSONResponse(await run_in_threadpool(_observe, state_of(request), batch))


async def list_batches(request: Request) -> Response:
    """``GET /v1beta/batches?pageSize=&pageToken=``: newest first, ``nextPageToken`` cursor."""
    if (refused := await _guard(request)) is not None:
        return refused
    raw = request.query_params.get("pageSize", "50")
    if not raw.isdigit() or int(raw) < 1:
        return gemini_error(400, "pageSize must be a positive integer.")
    size = min(int(raw), 1000)
    state = state_of(request)
    batches = list(reversed(state.gemini.batches.values()))
    token = request.query_params.get("pageToken")
    start = int(token) if token and token.isdigit() else 0
    window = batches[start : start + size]
    body: dict[str, Any] = {
        "operations": [await run_in_threadpool(_observe, state, b) for b in window]
    }
    if start + size < len(batches):
        body["nextPageToken"] = str(start + size)
    return JSONResponse(body)


async def cancel_batch(request: Request) -> Response:
    """``POST /v1beta/batches/{id}:cancel``: settles ``0.1 B`` later as CANCELLED."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request)
    if isinstance(batch, Response):
        return batch
    view = await run_in_threadpool(_observe, state, batch)
    if view.get("done"):
        return gemini_error(400, f"Batch {batch.name} has already ended; it cannot be cancelled.")
    with batch.lock:
        if batch.cancel_at is None:
            batch.cancel_at = time.time()
    settle = batch.cancel_at + 0.1 * batch.seconds
    state.finisher.schedule(settle, lambda: _advance(state, batch))
    return JSONResponse({})


async def delete_batch(request: Request) -> Response:
    """``DELETE /v1beta/batches/{id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    with state.gemini.lock:
        batch = state.gemini.batches.pop("batches/" + request.path_params["batch_id"], None)
    if batch is None:
        return gemini_error(404, "Batch not found.")
    return JSONResponse({})


def gemini_organisation(request: Request) -> str:
    """The API key of a Gemini call: the ``x-goog-api-key`` header or the ``key`` parameter."""
    return organisation(request.headers) or request.query_params.get("key", "")


async def _admit(request: Request) -> tuple[State, Any] | Response:
    """A real-time call's state and JSON payload, or its refusal: credentials, JSON, then the
    rate limiter (requests and about 4 body bytes a token)."""
    state = state_of(request)
    state.stats.add("realtime_requests")
    if (refused := await _guard(request)) is not None:
        return refused
    try:
        payload = await request.json()
    except ValueError:
        return gemini_error(400, "Invalid JSON payload received.")
    decision = state.limiter.check(max(1, len(await request.body()) // 4))
    if decision.allowed:
        return state, payload
    state.stats.add("realtime_429")
    body = error_status(429, "Resource has been exhausted (e.g. check quota).")
    body["details"] = [{"@type": RETRY_INFO, "retryDelay": f"{decision.retry_after:.3f}s"}]
    return JSONResponse({"error": body}, 429)


def _received(state: State, outcome: Outcome) -> None:
    state.stats.add("requests_received")
    if outcome.fault is not None:
        state.stats.add(f"fault_{outcome.fault}")
    if outcome.status == 429:
        state.stats.add("realtime_429")


async def embed_contents(request: Request) -> Response:
    """``POST /v1beta/models/{model}:batchEmbedContents`` (real time, rate-limited): up to 100
    ``EmbedContentRequest`` a call; ``requests_billed`` counts one per text embedded."""
    admitted = await _admit(request)
    if isinstance(admitted, Response):
        return admitted
    state, payload = admitted
    key = bytes_key(await request.body())
    requests = payload.get("requests") if isinstance(payload, dict) else None
    outcome = state.gemini_engine.embed(requests, key)
    _received(state, outcome)
    if outcome.status != 200:
        return JSONResponse({"error": outcome.body}, outcome.status)
    units = range(outcome.units)
    state.stats.bill([hash(("gemini-realtime", key, unit)) for unit in units], "embedding")
    return JSONResponse(outcome.body)


async def generate_content(request: Request) -> Response:
    """``POST /v1beta/models/{model}:generateContent`` (real time, rate-limited)."""
    admitted = await _admit(request)
    if isinstance(admitted, Response):
        return admitted
    state, payload = admitted
    if isinstance(payload, dict) and payload.get("serviceTier") == FLEX:
        state.stats.add("flex_requests")
        if state.flex.draw_unavailable():
            state.stats.add("flex_429")
            state.stats.add("realtime_429")
            body = error_status(429, "Resource exhausted: flex capacity is unavailable; retry.")
            body["details"] = [{"@type": RETRY_INFO, "retryDelay": f"{RETRY_AFTER_S}s"}]
            return JSONResponse({"error": body}, 429)
        await asyncio.sleep(state.config.flex_delay_s)
    key = bytes_key(await request.body())
    outcome = state.gemini_engine.run(payload, _model(request), key)
    _received(state, outcome)
    if outcome.status == 200:
        use = state.prompt_cache.gemini(gemini_organisation(request), _model(request), payload)
        gemini_usage(outcome.body, use)
        state.stats.cached(use)
        state.stats.bill([hash(("gemini-realtime", key))], "chat")
        state.stats.add("file_parts", outcome.file_parts)
        return JSONResponse(outcome.body, headers={SERVED_TIER: served_tier(state, payload)})
    return JSONResponse({"error": outcome.body}, outcome.status)


def served_tier(state: State, payload: Any) -> str:
    """The tier an answered request was served on: flex, priority, or standard (a priority
    request past ``gemini_priority_limit`` too: Gemini downgrades it and says so only in the
    ``x-gemini-service-tier`` header, https://ai.google.dev/gemini-api/docs/priority-inference)."""
    asked = payload.get("serviceTier") if isinstance(payload, dict) else None
    if asked == FLEX:
        return FLEX
    if asked != PRIORITY:
        return STANDARD
    limit = state.config.gemini_priority_limit
    with state.lock:
        served = limit is None or state.gemini_priority_served < limit
        state.gemini_priority_served += int(served)
    state.stats.add("priority_requests" if served else "priority_downgraded")
    return PRIORITY if served else STANDARD
