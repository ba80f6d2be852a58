"""Response helpers, provider error envelopes, auth checks and control-endpoint faults."""

import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from emulator.anthropic import engine as anthropic_engine
from emulator.core.faults import bytes_key
from emulator.core.outcome import new_id
from emulator.core.state import State
from emulator.openai import engine as openai_engine


class JSONResponse(Response):
    """A JSON response serialised with orjson."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class DiskFileResponse(FileResponse):
    """Streams a file from disk in 1 MiB chunks."""

    chunk_size = 1024 * 1024


def state_of(request: Request) -> State:
    """The emulator state attached to the app."""
    state: State = request.app.state.emulator
    return state


def is_anthropic(request: Request) -> bool:
    """Whether the path belongs to the Anthropic surface."""
    return request.url.path.startswith("/v1/messages")


def openai_json(
    content: Any, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An OpenAI response with ``x-request-id`` set."""
    all_headers = {"x-request-id": new_id("req_"), "openai-version": "2020-10-01"}
    all_headers.update(headers or {})
    return JSONResponse(content, status, all_headers)


def anthropic_json(
    content: Any, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An Anthropic response with ``request-id`` set (also inside error bodies)."""
    request_id = new_id("req_")
    if isinstance(content, dict) and content.get("type") == "error":
        content = {**content, "request_id": request_id}
    all_headers = {"request-id": request_id}
    all_headers.update(headers or {})
    return JSONResponse(content, status, all_headers)


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """An OpenAI error response."""
    return openai_json(openai_engine.error_body(message, type_, param, code), status)


def anthropic_error(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An Anthropic error response."""
    return anthropic_json(anthropic_engine.error_body(status, message), status, headers)


def provider_error(request: Request, status: int, message: str) -> JSONResponse:
    """An error in the shape of the provider that owns the request path."""
    if is_anthropic(request):
        return anthropic_error(status, message)
    type_ = {401: "invalid_request_error", 404: "invalid_request_error", 500: "server_error"}.get(
        status, "invalid_request_error"
    )
    return openai_error(status, message, type_)


def api_key_of(request: Request) -> str:
    """The key a request was sent with (``x-api-key`` or a bearer token; "" when none)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    bearer = token.strip() if scheme.lower() == "bearer" else ""
    return request.headers.get("x-api-key") or bearer


#: The header that names the OpenAI project a request is billed to (an API key's default
#: project when absent).
PROJECT_HEADER = "openai-project"


def project_of(request: Request, counter: str | None = None) -> str | None:
    """The ``OpenAI-Project`` a request names (None: none), counted as ``COUNTER:PROJECT`` in
    ``/_emulator/stats`` when ``counter`` is given."""
    project = request.headers.get(PROJECT_HEADER) or None
    if project is not None and counter is not None:
        state_of(request).stats.add(f"{counter}:{project}")
    return project


def check_auth(request: Request) -> JSONResponse | None:
    """The 401/400 the provider would send for missing credentials, or None."""
    headers = request.headers
    if is_anthropic(request):
        bearer = headers.get("authorization", "").lower().startswith("bearer ")
        if not headers.get("x-api-key") and not bearer:
            return anthropic_error(401, "x-api-key header is required")
        if not headers.get("anthropic-version"):
            return anthropic_error(400, "anthropic-version: header is required")
        return None
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        message = (
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
        return openai_error(401, message)
    return None


def control_fault(request: Request, body: bytes = b"") -> JSONResponse | None:
    """A transient 500 on a control endpoint (files, batches), drawn per call and attempt."""
    state = state_of(request)
    drawer = state.control_drawer
    if not drawer.active:
        return None
    key = bytes_key(f"{request.method} {request.url.path}?{request.url.query}".encode() + body)
    if not drawer.hit("server_error", key, drawer.next_attempt(key)):
        return None
    state.stats.add("control_500")
    return provider_error(
        request, 500, "The server had an error while processing your request. Sorry about that!"
    )


async def read_json(request: Request) -> tuple[Any, JSONResponse | None]:
    """The parsed JSON body, or the provider's 400 for an unparseable one."""
    raw = await request.body()
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError:
        if is_anthropic(request):
            return None, anthropic_error(
                400, "There was an issue with your request body: invalid JSON"
            )
        message = (
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
            "using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
        )
        return None, openai_error(400, message)


def now() -> float:
    """Current wall-clock time (one place to patch in tests)."""
    return time.time()
