"""OpenAI HTTP endpoints: files and batches, and the route table of every OpenAI endpoint."""

import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.azure import routes as azure
from emulator.core.http_common import (
    DiskFileResponse,
    api_key_of,
    check_auth,
    control_fault,
    openai_error,
    openai_json,
    project_of,
    read_json,
    state_of,
)
from emulator.core.multipart import MultipartError, boundary_of, parse_spooled
from emulator.core.outcome import new_id
from emulator.core.prompt_cache import organisation
from emulator.core.state import State, StoredFile
from emulator.openai import admin, realtime
from emulator.openai import batches as openai_batches
from emulator.openai.records import OpenAIBatch

FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals", "batch-api")
BATCH_PURPOSES = ("batch", "batch-api")  # OpenAI's, and Together's name for it
BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")
MAX_FILE_BYTES = 512 * 1024 * 1024


async def _guard(request: Request, body: bytes = b"") -> Response | None:
    return check_auth(request) or control_fault(request, body)


def _paginate(items: list[Any], after: str | None, limit: int) -> dict[str, Any]:
    start = 0
    if after:
        ids = [item["id"] for item in items]
        start = ids.index(after) + 1 if after in ids else len(items)
    page = items[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(items),
    }


def _limit(request: Request, default: int, maximum: int) -> int | Response:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return openai_error(
            400,
            f"Invalid 'limit': expected an integer, got '{raw}'.",
            param="limit",
            code="invalid_value",
        )
    if not 1 <= value <= maximum:
        return openai_error(
            400,
            f"Invalid 'limit': must be between 1 and {maximum}.",
            param="limit",
            code="invalid_value",
        )
    return value


def _file_or_404(request: Request, file_id: str) -> StoredFile | Response:
    """The file ``file_id`` if the request's project (``OpenAI-Project``) holds it, as OpenAI
    scopes files to projects."""
    stored = state_of(request).files.get(file_id)
    if stored is None or stored.project != project_of(request):
        return openai_error(404, f"No such File object: {file_id}", param="id")
    return stored


async def create_file(request: Request) -> Response:
    """``POST /v1/files``: multipart upload, stored on disk."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    if int(request.headers.get("content-length") or 0) > MAX_FILE_BYTES + 1024 * 1024:
        return openai_error(400, "File is too large.", param="file")
    try:
        boundary = boundary_of(request.headers.get("content-type", ""))
    except MultipartError as exc:
        return openai_error(400, str(exc))
    spool, target = state.new_path(".upload"), state.new_path()
    with spool.open("wb") as handle:
        async for chunk in request.stream():
            handle.write(chunk)
    try:
        upload = await run_in_threadpool(parse_spooled, spool, boundary, target)
    except MultipartError as exc:
        return openai_error(400, f"Could not parse multipart form: {exc}")
    finally:
        spool.unlink(missing_ok=True)
    problem = _upload_problem(upload.filename, upload.fields.get("purpose"), upload.file_size)
    if problem is not None:
        target.unlink(missing_ok=True)
        return problem
    project = project_of(request, "openai_project_files")
    name = upload.filename or "upload.jsonl"
    stored = state.add_file(name, upload.fields["purpose"], target, upload.digest, project)
    state.stats.add("files_uploaded")
    return openai_json(stored.as_json())


def _upload_problem(filename: str | None, purpose: str | None, size: int) -> Response | None:
    if filename is None:
        return openai_error(
            400,
            "Missing required parameter: 'file'.",
            param="file",
            code="missing_required_parameter",
        )
    if purpose is None:
        return openai_error(
            400,
            "Missing required parameter: 'purpose'.",
            param="purpose",
            code="missing_required_parameter",
        )
    if purpose not in FILE_PURPOSES:
        allowed = ", ".join(FILE_PURPOSES)
        message = f"Invalid value for 'purpose': '{purpose}'. Supported values are: {allowed}."
        return openai_error(400, message, param="purpose", code="invalid_value")
    if purpose == "batch" and not filename.lower().endswith(".jsonl"):
        return openai_error(400, "Invalid file format for Batch API. Must be .jsonl")
    if size > MAX_FILE_BYTES:
        return openai_error(400, "File is too large.", param="file")
    return None


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the configured model names (``EmulatorConfig.models``)."""
    if (refused := await _guard(request)) is not None:
        return refused
    models = state_of(request).config.models
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "emulator"} for m in models]
    return openai_json({"object": "list", "data": data})


async def list_files(request: Request) -> Response:
    """``GET /v1/files`` with ``purpose``, ``order``, ``after`` and ``limit``."""
    if (refused := await _guard(request)) is not None:
        return refused
    limit = _limit(request, 10_000, 10_000)
    if isinstance(limit, Response):
        return limit
    purpose, project = request.query_params.get("purpose"), project_of(request)
    files = [
        f.as_json()
        for f in state_of(request).files.values()
        if purpose in (None, f.purpose) and f.project == project
    ]
    if request.query_params.get("order", "desc") == "desc":
        files.reverse()
    return openai_json(_paginate(files, request.query_params.get("after"), limit))


async def get_file(request: Request) -> Response:
    """``GET /v1/files/{file_id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    stored = _file_or_404(request, request.path_params["file_id"])
    return stored if isinstance(stored, Response) else openai_json(stored.as_json())


async def delete_file(request: Request) -> Response:
    """``DELETE /v1/files/{file_id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    file_id = request.path_params["file_id"]
    if not state_of(request).delete_file(file_id):
        return openai_error(404, f"No such File object: {file_id}", param="id")
    return openai_json({"id": file_id, "object": "file", "deleted": True})


async def file_content(request: Request) -> Response:
    """``GET /v1/files/{file_id}/content``: the raw bytes, streamed from disk."""
    if (refused := await _guard(request)) is not None:
        return refused
    stored = _file_or_404(request, request.path_params["file_id"])
    if isinstance(stored, Response):
        return stored
    headers = {"x-request-id": new_id("req_")}
    return DiskFileResponse(stored.path, media_type="application/octet-stream", headers=headers)


def _batch_or_404(request: Request, batch_id: str) -> OpenAIBatch | Response:
    """The batch ``batch_id`` if the request's project holds it."""
    batch = state_of(request).openai_batches.get(batch_id)
    if batch is None or batch.job_model is not None or batch.project != project_of(request):
        # a Mistral job is not an OpenAI batch; another project's batch is not seen
        return openai_error(404, f"No batch found with id '{batch_id}'.", param="batch_id")
    return batch  # type: ignore[no-any-return]


def _check_create(  # noqa: PLR0911  (one exit per rule)
    state: State, payload: Any, endpoints: tuple[str, ...], project: str | None
) -> Response | StoredFile:
    if not isinstance(payload, dict):
        return openai_error(400, "The request body must be a JSON object.")
    for name in ("input_file_id", "endpoint", "completion_window"):
        if not isinstance(payload.get(name), str):
            return openai_error(
                400,
                f"Missing required parameter: '{name}'.",
                param=name,
                code="missing_required_parameter",
            )
    if payload["endpoint"] not in endpoints:
        allowed = ", ".join(endpoints)
        endpoint = payload["endpoint"]
        message = f"Invalid value for 'endpoint': '{endpoint}'. Supported values are: {allowed}."
        return openai_error(400, message, param="endpoint", code="invalid_value")
    windows = state.config.completion_windows
    if payload["completion_window"] not in windows:
        window = payload["completion_window"]
        allowed = ", ".join(f"'{w}'" for w in windows)
        message = (
            f"Invalid value for 'completion_window': '{window}'. Supported values are: {allowed}."
        )
        return openai_error(400, message, param="completion_window", code="invalid_value")
    metadata = payload.get("metadata")
    if metadata is not None and not _valid_metadata(metadata):
        message = (
            "Invalid 'metadata': at most 16 string pairs, keys up to 64 and values up to 512 "
            "characters."
        )
        return openai_error(400, message, param="metadata", code="invalid_value")
    stored = state.files.get(payload["input_file_id"])
    if stored is None or stored.project != project:
        message = (
            f"Cannot find file {payload['input_file_id']}, or project does not have access to it."
        )
        return openai_error(400, message, param="file_id")
    if stored.purpose not in BATCH_PURPOSES:
        message = f"File {stored.id} has purpose '{stored.purpose}'; a batch needs purpose 'batch'."
        return openai_error(400, message, param="input_file_id")
    return stored


def _valid_metadata(metadata: Any) -> bool:
    return (
        isinstance(metadata, dict)
        and len(metadata) <= 16
        and all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
            for k, v in metadata.items()
        )
    )


async def create_batch(request: Request) -> Response:
    """``POST /v1/batches``: always ``validating``; input problems surface later as ``failed``."""
    if (refused := await _guard(request)) is not None:
        return refused
    payload, bad = await read_json(request)
    if bad is not None:
        return bad
    state = state_of(request)
    endpoints = request.scope.get(azure.SCOPE_KEY) or BATCH_ENDPOINTS
    stored = _check_create(state, payload, endpoints, project_of(request))
    if isinstance(stored, Response):
        return stored
    batch = start_batch(
        request,
        stored,
        endpoint=payload["endpoint"],
        window=payload["completion_window"],
        metadata=payload.get("metadata"),
    )
    return openai_json(openai_batches.batch_json(batch, batch.created))


def start_batch(
    request: Request,
    stored: StoredFile,
    *,
    endpoint: str,
    window: str,
    metadata: dict[str, str] | None,
    job_model: str | None = None,
) -> OpenAIBatch:
    """A new batch of the input file ``stored``, kept, counted and scheduled to advance (an
    OpenAI batch, or a Mistral job naming ``job_model``)."""
    state = state_of(request)
    drawer = state.drawer
    expire = "expired" in drawer.rates and drawer.hit(
        "expired", stored.digest, drawer.next_attempt(stored.digest ^ 0x5EED)
    )
    batch = OpenAIBatch(
        id=new_id("batch_"),
        endpoint=endpoint,
        input_file=stored,
        completion_window=window,
        metadata=metadata,
        created=time.time(),
        seconds=state.durations.draw_for_file(stored.path),
        expire=expire,
        api_key=api_key_of(request),
        org=organisation(request.headers),
        job_model=job_model,
        project=project_of(request, "openai_project_batches"),
    )
    with state.lock:
        state.openai_batches[batch.id] = batch
    state.stats.add("batches_created")
    for due in (batch.in_progress_at, batch.end):
        state.finisher.schedule(due, lambda: openai_batches.advance(state, batch, time.time()))
    return batch


async def get_batch(request: Request) -> Response:
    """``GET /v1/batches/{batch_id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    state.stats.add("batch_retrievals")
    return openai_json(await run_in_threadpool(openai_batches.observe, state, batch))


async def list_batches(request: Request) -> Response:
    """``GET /v1/batches``: newest first, ``after`` cursor, ``limit`` 1-100."""
    if (refused := await _guard(request)) is not None:
        return refused
    limit = _limit(request, 20, 100)
    if isinstance(limit, Response):
        return limit
    state = state_of(request)
    state.stats.add("batch_list_pages")
    project = project_of(request)
    batches = [
        b
        for b in reversed(state.openai_batches.values())
        if b.job_model is None and b.project == project
    ]
    after = request.query_params.get("after")
    ids = [batch.id for batch in batches]
    start = ids.index(after) + 1 if after in ids else (len(ids) if after else 0)
    window = batches[start : start + limit]
    data = [await run_in_threadpool(openai_batches.observe, state, batch) for batch in window]
    return openai_json(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": start + limit < len(batches),
        }
    )


async def cancel_batch(request: Request) -> Response:
    """``POST /v1/batches/{batch_id}/cancel``: ``cancelling``, then ``cancelled``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = _batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    view = await run_in_threadpool(openai_batches.observe, state, batch)
    if view["status"] in openai_batches.TERMINAL:
        return openai_error(
            400, f"Cannot cancel a batch with status '{view['status']}'.", param="batch_id"
        )
    request_cancel(state, batch)
    return openai_json(openai_batches.batch_json(batch, time.time()))


def request_cancel(state: State, batch: OpenAIBatch) -> None:
    """Cancel ``batch`` (``cancelling``, then ``cancelled``) unless it is being cancelled."""
    with batch.lock:
        if batch.cancel_at is None:
            batch.cancel_at = time.time()
    settle = batch.cancel_at + 0.1 * batch.seconds
    state.finisher.schedule(settle, lambda: openai_batches.advance(state, batch, time.time()))


#: OpenAI's routes: models, files, batches, the real-time endpoints and the admin reports.
ROUTES = [
    *admin.ADMIN_ROUTES,
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/files", create_file, methods=["POST"]),
    Route("/v1/files", list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", file_content, methods=["GET"]),
    Route("/v1/batches", create_batch, methods=["POST"]),
    Route("/v1/batches", list_batches, methods=["GET"]),
    Route("/v1/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/v1/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
    Route("/v1/chat/completions", realtime.openai_realtime, methods=["POST"]),
    Route("/v1/responses", realtime.openai_realtime, methods=["POST"]),
    Route("/v1/embeddings", realtime.openai_realtime, methods=["POST"]),
]
