"""Gemini API endpoints (``/v1beta``): Files (resumable upload, download), Batches, generateContent.

Auth is the ``x-goog-api-key`` header (or ``?key=``); errors are Google's envelope
``{"error": {"code", "message", "status"}}``. Paths are the ones ``google-genai`` calls.
"""

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from emulator.core.http_common import DiskFileResponse, JSONResponse, control_fault, state_of
from emulator.core.line_fates import LineFates
from emulator.core.outcome import new_id
from emulator.core.prompt_cache import CacheUse
from emulator.core.state import State
from emulator.gemini import batches as gb
from emulator.gemini.engine import error_status

LIST_PAGE_MAX = 1000


def gemini_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error_status(status, message)}, status, headers)


class _StateSink(gb.Sink):
    def __init__(self, state: State) -> None:
        self.state = state

    def new_path(self) -> Path:
        return self.state.new_path()

    def add_result_file(self, batch: gb.GeminiBatch, path: Path) -> str:
        name = f"files/batch-{batch.name.removeprefix('batches/')}"
        stored = gb.GeminiFile(
            name, f"{batch.display_name}-output", "application/jsonl",
            path.stat().st_size, time.time(), path, source="GENERATED",
        )  # fmt: skip
        with self.state.gemini.lock:
            self.state.gemini.files[name] = stored
        return name

    def account(self, stats: Counter[str], billed: list[int], kind: str) -> None:
        self.state.stats.merge(stats)
        self.state.stats.bill(billed, kind)

    def cached(self, org: str, model: str, request: dict[str, Any]) -> CacheUse:
        use = self.state.prompt_cache.gemini(org, model, request)
        self.state.stats.cached(use)
        return use

    def fates(self, batch: gb.GeminiBatch, ran_all: bool) -> LineFates:
        config = self.state.config
        drop = config.drop_lines if ran_all else 0.0
        return LineFates(config.seed, batch.name, drop, config.duplicate_lines)


async def _guard(request: Request) -> Response | None:
    if not (request.headers.get("x-goog-api-key") or request.query_params.get("key")):
        return gemini_error(403, "Method doesn't allow unregistered callers (callers without "
                            "established identity). Please use API Key or other form of API "
                            "consumer identity to call this API.")  # fmt: skip
    if control_fault(request) is not None:
        return gemini_error(500, "An internal error has occurred. Please retry or report it.")
    return None


def _observe(state: State, batch: gb.GeminiBatch) -> dict[str, Any]:
    gb.advance(state.gemini_engine, batch, time.time(), _StateSink(state))
    return gb.batch_json(batch)


# -- files --------------------------------------------------------------------------------------
async def upload(request: Request) -> Response:
    """``POST /upload/v1beta/files``: start a resumable session, or send a chunk of one."""
    upload_id = request.query_params.get("upload_id")
    if upload_id is None:  # the session URL itself authorises the chunks that follow
        if (refused := await _guard(request)) is not None:
            return refused
        return await _start_upload(request)
    state = state_of(request)
    session = state.gemini.uploads.get(upload_id)
    if session is None:
        return gemini_error(404, f"Upload session {upload_id} not found.")
    command = request.headers.get("x-goog-upload-command", "")
    offset = int(request.headers.get("x-goog-upload-offset") or 0)
    if offset != session.received:
        return gemini_error(400, f"Upload offset {offset} does not match {session.received}.")
    chunk = await request.body()
    with session.path.open("ab") as handle:
        handle.write(chunk)
    session.received += len(chunk)
    if "finalize" not in command:
        return Response(b"", headers={"x-goog-upload-status": "active"})
    return _finalize(request, state, upload_id, session)


async def _start_upload(request: Request) -> Response:
    state = state_of(request)
    headers = request.headers
    size = int(headers.get("x-goog-upload-header-content-length") or 0)
    limit = state.config.gemini_max_file_bytes
    if size > limit:
        return gemini_error(400, f"File size {size} exceeds the limit of {limit} bytes.")
    try:
        meta = (await request.json() or {}).get("file") or {}
    except ValueError:
        meta = {}
    name = str(meta.get("name") or "")
    if (refused := _refused_name(state, name)) is not None:
        return refused
    upload_id = new_id("up")
    state.gemini.uploads[upload_id] = gb.Upload(
        display_name=str(meta.get("displayName") or ""),
        mime_type=str(headers.get("x-goog-upload-header-content-type") or "application/jsonl"),
        size=size,
        path=state.new_path(),
        name=name,
    )
    url = f"{str(request.base_url).rstrip('/')}/upload/v1beta/files?upload_id={upload_id}"
    url += "&upload_protocol=resumable"
    return Response(b"", headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})


#: A ``File``'s ID (its name after ``files/``), when chosen at create: "up to 40 characters that
#: are lowercase alphanumeric or dashes (-)", not starting or ending with a dash
#: (https://ai.google.dev/api/files#File).
FILE_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")


def _refused_name(state: State, name: str) -> Response | None:
    """The refusal of a ``File`` name asked for at create: malformed, or taken by a file
    that still lives (None: the name is free, or none was asked for)."""
    if not name:
        return None
    file_id = name.removeprefix("files/")
    if not name.startswith("files/") or FILE_ID.fullmatch(file_id) is None:
        rule = "up to 40 lowercase letters, digits or dashes after files/, no dash at either end"
        return gemini_error(400, f"Invalid file name {name!r}: {rule}.")
    if state.gemini.file(name, time.time()) is not None:
        return gemini_error(409, f"File {name} already exists.")
    return None


def _finalize(request: Request, state: State, upload_id: str, session: gb.Upload) -> Response:
    state.gemini.uploads.pop(upload_id, None)
    name = session.name or f"files/{new_id('')[:12].lower()}"
    stored = gb.GeminiFile(
        name, session.display_name or name, session.mime_type, session.received, time.time(),
        session.path, retention_s=state.config.gemini_file_retention_s,
    )  # fmt: skip
    with state.gemini.lock:
        state.gemini.files[name] = stored
    state.stats.add("files_uploaded")
    body = {"file": stored.as_json(str(request.base_url))}
    return JSONResponse(body, headers={"x-goog-upload-status": "final"})


def _file_or_404(request: Request) -> gb.GeminiFile | Response:
    name = "files/" + request.path_params["file_id"]
    stored = state_of(request).gemini.file(name, time.time())
    return stored if stored is not None else gemini_error(404, f"File {name} not found.")


async def get_file(request: Request) -> Response:
    """``GET /v1beta/files/{id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    stored = _file_or_404(request)
    if isinstance(stored, Response):
        return stored
    return JSONResponse(stored.as_json(str(request.base_url)))


async def download_file(request: Request) -> Response:
    """``GET /v1beta/files/{id}:download?alt=media`` (also under ``/download``)."""
    if (refused := await _guard(request)) is not None:
        return refused
    stored = _file_or_404(request)
    if isinstance(stored, Response):
        return stored
    return DiskFileResponse(stored.path, media_type="application/octet-stream")


async def delete_file(request: Request) -> Response:
    """``DELETE /v1beta/files/{id}``."""
    if (refused := await _guard(request)) is not None:
        return refused
    state = state_of(request)
    with state.gemini.lock:
        stored = state.gemini.files.pop("files/" + request.path_params["file_id"], None)
    if stored is None:
        return gemini_error(404, "File not found.")
    stored.path.unlink(missing_ok=True)
    return JSONResponse({})
