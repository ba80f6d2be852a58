"""The emulator as an AI gateway in front of it would answer: one ASGI middleware.

- ``required_headers`` (``--require-header NAME`` or ``NAME=VALUE``): a provider call (any path
  but ``/_emulator/...``) without one of them is answered 400 with the gateway's own envelope
  (``{"status": "failure", "message": "..."}``, as Portkey's gateway answers), naming the header;
  one whose ``NAME=VALUE`` header holds another value is answered 401 the same way (a gateway
  checking its own key).
- ``fields`` (``--require-body-field NAME``): a batch create (``POST /v1/batches``) whose JSON
  body, or a file upload (``POST /v1/files``) whose form, lacks one of them is answered 400 the
  same way, naming the field (LiteLLM's proxy routes these calls by ``custom_llm_provider``).
- ``gateway_nulls`` (``--gateway-nulls``): OpenAI batch and file objects come back the way
  LiteLLM's proxy re-shapes them: ``null`` for every optional field the object lacks
  (``usage``, ``request_counts`` until known, ``errors``, ``output_file_id``...), and fields the
  API does not define (``custom_llm_provider``, ``_hidden_params``).
"""

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# Every optional member of OpenAI's batch object: a gateway sends each, ``null`` when unset.
BATCH_OPTIONAL = (
    "errors", "output_file_id", "error_file_id", "in_progress_at", "finalizing_at",
    "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at",
    "request_counts", "metadata", "usage", "model",
)  # fmt: skip
FILE_OPTIONAL = ("expires_at", "status_details")
# What LiteLLM's objects carry beside the API's own fields.
EXTRA = {"custom_llm_provider": "openai", "_hidden_params": {"litellm_call_id": None}}


class GatewayMiddleware:
    """Answers as a gateway would: ``required`` headers, ``nulls`` re-shaped objects."""

    def __init__(
        self, app: App, required: tuple[str, ...], nulls: bool, fields: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        pairs = [entry.partition("=") for entry in required]
        self.required = {name.strip().lower(): value if eq else None for name, eq, value in pairs}
        self.nulls = nulls
        self.fields = fields

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith("/_emulator"):
            await self.app(scope, receive, send)
            return
        sent = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        missing = [name for name in self.required if name not in sent]
        if missing:
            await _refuse(send, f"The {missing[0]} header is required")
            return
        wrong = [n for n, v in self.required.items() if v is not None and sent[n] != v]
        if wrong:
            await _refuse(send, f"The {wrong[0]} header's value is not accepted", 401)
            return
        if self.fields and scope.get("method") == "POST" and path in FIELD_PATHS:
            body = await whole_body(receive)
            lacking = [name for name in self.fields if not _carries(path, body, name)]
            if lacking:
                await _refuse(send, f"The {lacking[0]} field is required in the request body")
                return
            receive = replayed(body, receive)
        if self.nulls and _reshaped_path(path):
            await self.app(scope, receive, _Reshaping(send).send)
            return
        await self.app(scope, receive, send)


def _reshaped_path(path: str) -> bool:
    """The batches and files routes whose answers are objects (not a file's content)."""
    return path.startswith(("/v1/batches", "/v1/files")) and not path.endswith("/content")


# The control calls that carry a gateway's body fields: the batch create, the file upload.
FIELD_PATHS = ("/v1/batches", "/v1/files")


def _carries(path: str, body: bytes, name: str) -> bool:
    """Does the batch create's JSON ``body`` (or the upload's multipart form) hold ``name``?"""
    if path == "/v1/files":  # a form field's part header names it
        return f'name="{name}"'.encode() in body
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(payload, dict) and name in payload


async def whole_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replayed(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` whole, then what ``receive`` gives (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _refuse(send: Send, message: str, status: int = 400) -> None:
    body = orjson.dumps({"status": "failure", "message": message})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Reshaping:
    """Holds a JSON answer back until its last chunk, then sends it re-shaped."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._start: Message | None = None
        self._chunks: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._start = message
            return
        self._chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(self._chunks)
        assert self._start is not None
        status = int(self._start["status"])
        if status < 300:
            body = orjson.dumps(reshape(orjson.loads(body)))
        headers = [(k, v) for k, v in self._start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", b"%d" % len(body)))
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})


def reshape(answer: Any) -> Any:
    """A batch, file or list of them as the gateway returns it."""
    if not isinstance(answer, dict):
        return answer
    if answer.get("object") == "list":
        return {**answer, "data": [reshape(item) for item in answer.get("data") or []]}
    optional = {"batch": BATCH_OPTIONAL, "file": FILE_OPTIONAL}.get(str(answer.get("object")))
    if optional is None:
        return answer
    nulled = {**dict.fromkeys(optional), **answer, **EXTRA}
    counts = nulled.get("request_counts")
    if isinstance(counts, dict) and not counts.get("total"):
        nulled["request_counts"] = None  # not known yet (validating)
    if not nulled.get("errors"):
        nulled["errors"] = None
    return nulled
