"""Mistral's batch jobs (``/v1/batch/jobs...``), served by the OpenAI batch engine.

A job names one uploaded file (``POST /v1/files``, OpenAI's route, ``purpose=batch``), its model
and endpoint; its lines are ``{"custom_id", "body"}`` with no method or url, and a body without a
model takes the job's. The job is an OpenAI batch underneath (`OpenAIBatch` with ``job_model``),
so its lifecycle, faults, billing and the ``/_emulator/stats`` counters are the OpenAI ones; only
the job object is Mistral's: upper-case statuses, ``output_file`` and ``error_file``, the
``*_requests`` counters, ``errors`` as ``{message, count}``. The list pages by number (``page``,
``page_size``, newest first) and filters by ``status`` and ``metadata`` (a JSON object whose
pairs a job's metadata must hold).
"""

import time
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.core.http_common import JSONResponse, check_auth, control_fault, read_json, state_of
from emulator.core.state import State, StoredFile
from emulator.openai import batches as openai_batches
from emulator.openai.records import OpenAIBatch
from emulator.openai.routes import request_cancel, start_batch

ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")
STATUSES = {
    "validating": "QUEUED",
    "in_progress": "RUNNING",
    "finalizing": "RUNNING",
    "completed": "SUCCESS",
    "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED",
    "cancelling": "CANCELLATION_REQUESTED",
    "cancelled": "CANCELLED",
}
ENDED = frozenset({"SUCCESS", "FAILED", "TIMEOUT_EXCEEDED", "CANCELLED"})
MAX_TIMEOUT_HOURS = 168


def mistral_error(status: int, message: str) -> JSONResponse:
    """Mistral's error object."""
    body = {"object": "error", "message": message, "type": "invalid_request", "code": None}
    return JSONResponse(body, status)


def _invalid(location: str, message: str) -> JSONResponse:
    """Mistral's 422 for a request that fails its schema."""
    detail = [{"type": "value_error", "loc": ["body", location], "msg": message}]
    return JSONResponse({"object": "error", "detail": detail}, 422)


def job_json(batch: OpenAIBatch, now: float) -> dict[str, Any]:
    """The Mistral ``batch`` job object of ``batch`` as seen at ``now``."""
    view = openai_batches.batch_json(batch, now)
    counts = view["request_counts"]
    errors = (view.get("errors") or {}).get("data") or []
    final = batch.final
    succeeded = final.completed if final is not None else 0
    return {
        "id": batch.id,
        "object": "batch",
        "input_files": [batch.input_file.id],
        "metadata": batch.metadata,
        "endpoint": batch.endpoint,
        "model": batch.job_model,
        "agent_id": None,
        "output_file": view["output_file_id"],
        "error_file": view["error_file_id"],
        "errors": [{"message": e.get("message", ""), "count": 1} for e in errors],
        "outputs": None,
        "status": STATUSES[view["status"]],
        "created_at": view["created_at"],
        "total_requests": counts["total"],
        "completed_requests": counts["completed"] + counts["failed"],
        "succeeded_requests": succeeded,
        "failed_requests": counts["failed"],
        "started_at": view["in_progress_at"],
        "completed_at": final and int(final.at),
    }


async def _guard(request: Request) -> Response | None:
    return check_auth(request) or control_fault(request)


def _job_or_404(state: State, job_id: str) -> OpenAIBatch | Response:
    batch = state.openai_batches.get(job_id)
    if batch is None or batch.job_model is None:
        return mistral_error(404, f"Batch job {job_id} not found.")
    return batch  # type: ignore[no-any-return]


def _checked(state: State, payload: Any) -> tuple[StoredFile, int] | Response:  # noqa: PLR0911  (one exit per rule)
    """The job's input file and timeout, or Mistral's refusal."""
    if not isinstance(payload, dict):
        return _invalid("", "Input should be a valid dictionary")
    files = payload.get("input_files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        return _invalid("input_files", "Field required: a list of file ids")
    if len(files) != 1:
        return _invalid("input_files", "The emulator takes one input file per job")
    if not isinstance(payload.get("model"), str) or not payload["model"]:
        return _invalid("model", "Field required")
    if payload.get("endpoint") not in ENDPOINTS:
        return _invalid("endpoint", f"Input should be one of {', '.join(ENDPOINTS)}")
    hours = payload.get("timeout_hours", 24)
    if type(hours) is not int or not 1 <= hours <= MAX_TIMEOUT_HOURS:
        return _invalid("timeout_hours", f"Input should be from 1 to {MAX_TIMEOUT_HOURS}")
    metadata = payload.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return _invalid("metadata", "Input should be a valid dictionary")
    stored = state.files.get(files[0])
    if stored is None:
        return mistral_error(404, f"File {files[0]} not found.")
    return stored, hours


async def create_job(request: Request) -> Response:
    """``POST /v1/batch/jobs``: a job of one uploaded file, ``QUEUED``."""
    if (refused := await _guard(request)) is not None:
        return refused
    payload, bad = await read_json(request)
    if bad is not None:
        return bad
    checked = _checked(state_of(request), payload)
    if isinstance(checked, Response):
        return checked
    stored, hours = checked
    batch = start_batch(
        request,
        stored,
        endpoint=payload["endpoint"],
        window=f"{hours}h",
        metadata=payload.get("metadata"),
        job_model=payload["model"],
    )
    return JSONResponse(job_json(batch, batch.created))


async def get_job(request: Request) -> Response:
    """``GET /v1/batch/jobs/{job_id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _job_or_404(state, request.path_params["job_id"])
    if isinstance(batch, Response):
        return batch
    return JSONResponse(await run_in_threadpool(_observe, state, batch))


def _observe(state: State, batch: OpenAIBatch) -> dict[str, Any]:
    now = time.time()
    openai_batches.advance(state, batch, now)
    return job_json(batch, now)


def _wanted(request: Request) -> dict[str, Any] | Response:
    """The ``metadata`` filter of a listing (a JSON object), or the 422 for another value."""
    raw = request.query_params.get("metadata")
    if raw is None:
        return {}
    try:
        wanted = orjson.loads(raw)
    except orjson.JSONDecodeError:
        wanted = None
    if not isinstance(wanted, dict):
        return _invalid("metadata", "Input should be a JSON object")
    return wanted


async def list_jobs(request: Request) -> Response:
    """``GET /v1/batch/jobs``: newest first, ``page`` from 0 and ``page_size``; ``status``
    (repeatable) and ``metadata`` narrow it."""
    if (refused := await _guard(request)) is not None:
        return refused
    wanted = _wanted(request)
    if isinstance(wanted, Response):
        return wanted
    try:
        page = int(request.query_params.get("page", 0))
        size = int(request.query_params.get("page_size", 100))
    except ValueError:
        return _invalid("page", "Input should be a valid integer")
    statuses = set(request.query_params.getlist("status"))
    state = state_of(request)
    jobs = [b for b in reversed(state.openai_batches.values()) if b.job_model is not None]
    views = [await run_in_threadpool(_observe, state, batch) for batch in jobs]
    chosen = [
        view
        for view in views
        if (not statuses or view["status"] in statuses)
        and all((view["metadata"] or {}).get(k) == v for k, v in wanted.items())
    ]
    data = chosen[page * size : (page + 1) * size]
    return JSONResponse({"object": "list", "data": data, "total": len(chosen)})


async def cancel_job(request: Request) -> Response:
    """``POST /v1/batch/jobs/{job_id}/cancel``: ``CANCELLATION_REQUESTED``, then
    ``CANCELLED``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _job_or_404(state, request.path_params["job_id"])
    if isinstance(batch, Response):
        return batch
    view = await run_in_threadpool(_observe, state, batch)
    if view["status"] in ENDED:
        return mistral_error(400, f"Cannot cancel a batch job with status {view['status']}.")
    request_cancel(state, batch)
    return JSONResponse(job_json(batch, time.time()))


ROUTES = [
    Route("/v1/batch/jobs", create_job, methods=["POST"]),
    Route("/v1/batch/jobs", list_jobs, methods=["GET"]),
    Route("/v1/batch/jobs/{job_id}", get_job, methods=["GET"]),
    Route("/v1/batch/jobs/{job_id}/cancel", cancel_job, methods=["POST"]),
]
