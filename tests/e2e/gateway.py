"""A misbehaving gateway in front of the emulator, for the hostile-case tests: a small real HTTP
server that forwards every call to the emulator unless its ``mode`` says to misbehave the way
real gateway programs were seen to:

- ``forward``: forwards every call unchanged (the gateway after the fix);
- ``500-after-billing``: forwards POSTs (the emulator answers and bills), then answers 500 with
  the same body every time;
- ``gateway-exception``: the same, but the 500 is marked as the gateway's own exception as
  Portkey's gateway marks it (``x-portkey-gateway-exception: true``, its "Something went
  wrong" body);
- ``missing-header``, ``unknown-model``, ``unsupported-parameter``: answers every call as
  `REFUSALS` says (a gateway's "header required" 400, a 404 for a model the upstream does not
  have, a 400 for a parameter the model does not take), forwarding nothing;
- ``schema-500``: answers a POST asking for a JSON-schema response format 500, as llama.cpp's
  server does (it takes only ``json_object``), and forwards everything else;
- ``outage``: answers every call 503 as a load balancer before a service that is down does,
  forwarding nothing (a test sets ``mode`` back to ``forward`` when the outage ends);
- ``ignores-schema``: forwards every call with the body's ``response_format`` taken out, as a
  server that ignores it answers (prose where JSON was asked);
- ``failing-download``: forwards everything but ``GET .../files/{id}/content``, which it
  answers 500 with the same body every time.

``forwarded`` counts the calls it passed on and ``posted`` each POST body it passed on (a counting
proxy in front of a server that keeps no count); the emulator's own counters say what was billed.
"""

import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

UPSTREAM_FAILED = (
    b'{"error": {"message": "upstream returned an unreadable answer", "type": "server_error"}}'
)
HEADER_REQUIRED = (
    b'{"status": "failure", "message": "Either x-portkey-config or x-portkey-provider header '
    b'is required"}'
)
REFUSALS = {
    "missing-header": (400, HEADER_REQUIRED),
    "unknown-model": (
        404,
        b'{"error": {"message": "The model `gpt-4o-mini` does not exist or you do not have '
        b'access to it.", "type": "invalid_request_error", "code": "model_not_found"}}',
    ),
    "unsupported-parameter": (
        400,
        b'{"error": {"message": "Unsupported parameter: \'temperature\' is not supported with '
        b'this model.", "type": "invalid_request_error", "code": "unsupported_parameter"}}',
    ),
}
SCHEMA_REFUSED = (
    b'{"error": {"message": "response_format type json_schema is not supported, use '
    b'json_object", "type": "server_error"}}'
)
OUTAGE = (
    b'{"error": {"message": "upstream connect error or disconnect/reset before headers", '
    b'"type": "server_error"}}'
)
GATEWAY_EXCEPTION = b'{"status":"failure","message":"Something went wrong"}'
EXCEPTION_MARK = [("x-portkey-gateway-exception", "true")]
NO_CONTENT = b'{"error": {"message": "No connected db.", "type": "server_error"}}'
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Gateway:
    """The gateway's state, shared by its handler threads; ``mode`` may change between runs."""

    def __init__(self, upstream: str, mode: str, healthy_posts: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = mode
        self.healthy_posts = healthy_posts  # POSTs answered as the emulator does before misbehaving
        self.forwarded = 0
        self.posted: Counter[bytes] = Counter()
        self.posts = 0
        self.lock = threading.Lock()

    def misbehaves_on_post(self) -> bool:
        with self.lock:
            self.posts += 1
            misbehaving = self.mode in {"500-after-billing", "gateway-exception"}
            return misbehaving and self.posts > self.healthy_posts


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gateway: ClassVar[Gateway]

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        gateway = self.gateway
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if gateway.mode in REFUSALS:
            self._answer(*REFUSALS[gateway.mode])
            return
        if gateway.mode == "outage":
            self._answer(503, OUTAGE)
            return
        if gateway.mode == "schema-500" and b'"json_schema"' in body:
            self._answer(500, SCHEMA_REFUSED)
            return
        download = method == "GET" and self.path.endswith("/content")
        if gateway.mode == "failing-download" and download:
            self._answer(500, NO_CONTENT)
            return
        if gateway.mode == "ignores-schema" and b'"response_format"' in body:
            loaded = json.loads(body)
            loaded.pop("response_format", None)
            body = json.dumps(loaded).encode()
        status, headers, content = self._forward(method, body)
        if method == "POST" and gateway.misbehaves_on_post():
            if gateway.mode == "gateway-exception":
                self._answer(500, GATEWAY_EXCEPTION, EXCEPTION_MARK)
            else:
                self._answer(500, UPSTREAM_FAILED)
            return
        self._answer(status, content, headers)

    def _forward(self, method: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        gateway = self.gateway
        with gateway.lock:
            gateway.forwarded += 1
            if method == "POST":
                gateway.posted[body] += 1
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        call = urllib.request.Request(
            gateway.upstream + self.path, data=body or None, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(call, timeout=300) as answer:
                return answer.status, list(answer.headers.items()), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, list(error.headers.items()), error.read()

    def _answer(self, status: int, content: bytes, headers: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP:
                self.send_header(name, value)
        if not any(name.lower() == "content-type" for name, _ in headers):
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the caller gave up
            self.wfile.write(content)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def gateway(upstream: str, mode: str, healthy_posts: int = 0) -> Iterator[tuple[Gateway, str]]:
    """A gateway forwarding to ``upstream`` in ``mode``, and its base URL (no trailing slash)."""
    state = Gateway(upstream, mode, healthy_posts)
    handler = type("Handler", (_Handler,), {"gateway": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
