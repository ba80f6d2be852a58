"""Azure OpenAI's routes, served by the OpenAI ones: one ASGI middleware.

- ``/openai/files...`` and ``/openai/batches...`` are ``/v1/files...`` and ``/v1/batches...``;
  a batch created here names Azure's endpoints (``/chat/completions``, ``/embeddings``), which
  its lines' ``url`` repeat, and runs on the OpenAI engine's.
- ``/openai/deployments/{deployment}/chat/completions`` and ``.../embeddings`` are the real-time
  ``/v1/chat/completions`` and ``/v1/embeddings``; the deployment is the model (the body's
  ``model`` when it names none).
- The v1 API (https://learn.microsoft.com/azure/foundry/openai/api-version-lifecycle):
  ``/openai/v1/files...``, ``/openai/v1/batches...``, ``/openai/v1/chat/completions`` and
  ``/openai/v1/embeddings`` are OpenAI's paths under ``/openai``; a batch names OpenAI's
  endpoints (``/v1/chat/completions``, ``/v1/embeddings``: the enum of
  https://learn.microsoft.com/azure/foundry/reference/rest/batches-create-batch) and a real-time
  request names its deployment in ``model``. A v1 call takes no ``api-version``: one sent is
  answered 400 "api-version query parameter is not allowed when using /v1 path" (Azure's answer
  as its users report it, e.g. github.com/pydantic/pydantic-ai/issues/5066).
- Every call on the dated paths needs ``?api-version=`` (Azure: 404 "Resource not found"
  without one; 400 for a value that is not a dated version). Every call takes its key in an
  ``api-key`` header (no key: Azure's 401; on the v1 paths a bearer token too, as the OpenAI
  client sends it), passed on as the bearer token the OpenAI routes read.
"""

import re
import urllib.parse
from typing import Any

import orjson

from emulator.core.gateway import App, Receive, Scope, Send, replayed, whole_body

PREFIX = "/openai/"
#: set in the scope of a request that came by Azure's routes: the endpoints its batch may name
SCOPE_KEY = "emulator.azure"
#: what an Azure batch's ``endpoint`` (and its lines' ``url``) may be on the dated paths
BATCH_ENDPOINTS = ("/chat/completions", "/embeddings")
#: and on the v1 paths
V1_BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")
V1_PREFIX = "/openai/v1/"
_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/(chat/completions|embeddings)")
_CONTROL = re.compile(r"/openai/(files|batches)(/.*)?")
_V1 = re.compile(r"/openai(/v1/(?:files|batches)(?:/.*)?|/v1/chat/completions|/v1/embeddings)")
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")
NOT_FOUND = {"error": {"code": "404", "message": "Resource not found"}}
UNSUPPORTED = {"error": {"code": "BadRequest", "message": "API version not supported"}}
VERSION_ON_V1 = {
    "error": {
        "code": "BadRequest",
        "message": "api-version query parameter is not allowed when using /v1 path",
    }
}
DENIED = {
    "error": {
        "code": "401",
        "message": "Access denied due to invalid subscription key or wrong API endpoint. Make "
        "sure to provide a valid key for an active subscription and use a correct regional API "
        "endpoint for your resource.",
    }
}


def engine_endpoint(endpoint: str) -> str:
    """The OpenAI engine's endpoint for a batch's (Azure's ``/chat/completions`` is OpenAI's
    ``/v1/chat/completions``)."""
    return endpoint if endpoint.startswith("/v1/") else f"/v1{endpoint}"


class AzureRoutes:
    """Serves Azure's paths by the OpenAI routes (other paths pass untouched)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        deployment, target = _target(path)
        refusal = (404, NOT_FOUND) if target is None else _refusal(scope)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        assert target is not None
        key = _key(scope)
        assert key is not None
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
        headers.append((b"authorization", b"Bearer " + key))
        if deployment is not None:
            body = _naming_model(await whole_body(receive), deployment)
            receive = replayed(body, receive)
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-length", b"%d" % len(body)))
        scope = {**scope, "path": target, "raw_path": target.encode(), "headers": headers}
        scope[SCOPE_KEY] = V1_BATCH_ENDPOINTS if path.startswith(V1_PREFIX) else BATCH_ENDPOINTS
        await self.app(scope, receive, send)


def _target(path: str) -> tuple[str | None, str | None]:
    """(the deployment, the OpenAI path) of an Azure path; None for one Azure does not serve."""
    found = _DEPLOYMENT.fullmatch(path)
    if found is not None:
        return found.group(1), f"/v1/{found.group(2)}"
    control = _CONTROL.fullmatch(path)
    if control is not None:
        return None, f"/v1/{control.group(1)}{control.group(2) or ''}"
    v1 = _V1.fullmatch(path)
    if v1 is not None:
        return None, v1.group(1)
    return None, None


def _refusal(scope: Scope) -> tuple[int, dict[str, Any]] | None:
    """Azure's answer to a call without an API version (with one, on the v1 paths) or key, or
    None."""
    query = dict(urllib.parse.parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    version = query.get("api-version")
    if str(scope.get("path", "")).startswith(V1_PREFIX):
        if version is not None:
            return 400, VERSION_ON_V1
    elif not version:
        return 404, NOT_FOUND
    elif not _VERSION.fullmatch(version):
        return 400, UNSUPPORTED
    if _key(scope) is None:
        return 401, DENIED
    return None


def _key(scope: Scope) -> bytes | None:
    """The call's key: its ``api-key`` header, or on the v1 paths a bearer token (the OpenAI
    client's ``api_key``, as the v1 API takes it)."""
    headers: dict[bytes, bytes] = {k.lower(): v.strip() for k, v in scope["headers"]}
    if headers.get(b"api-key"):
        return headers[b"api-key"]
    if not str(scope.get("path", "")).startswith(V1_PREFIX):
        return None
    return headers.get(b"authorization", b"").removeprefix(b"Bearer ").strip() or None


def _naming_model(body: bytes, deployment: str) -> bytes:
    """The request's JSON ``body``, naming ``deployment`` as its model when it names none."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if isinstance(payload, dict) and "model" not in payload:
        return orjson.dumps({**payload, "model": deployment})
    return body


async def _answer(send: Send, status: int, content: dict[str, Any]) -> None:
    body = orjson.dumps(content)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
