"""An S3 store that ignores a request header: a forwarding proxy in front of a real store.

Every request is forwarded byte for byte (method, path and query, headers, body) to the
upstream store, less the headers named in ``drop``, and the answer comes back as the upstream
gave it. Dropping ``If-None-Match`` makes a store that overwrites where it should refuse (as
rclone's ``serve s3`` does); dropping ``Range`` makes one that answers every ranged GET 200
with the whole object.

SigV4 signs every header a client sends but a few (``user-agent``, ``expect``, ...): botocore and
polars sign ``If-None-Match`` and ``Range``, so a request without them no longer matches its
signature. The upstream must therefore accept requests whatever their signature: a SeaweedFS
started without identities (`tests.seaweedfs.weed_server` with ``auth=False``).
"""

import http.client
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_ProxyServer"

    def _forward(self) -> None:
        body = self._body()
        with self.server.lock:
            self.server.forwarded += 1
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in _HOP and k.lower() not in self.server.drop
        }
        upstream = http.client.HTTPConnection(self.server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", answer.getheader("Content-Length") or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, drop: frozenset[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = urllib.parse.urlsplit(upstream).netloc
        self.drop = drop
        self.forwarded = 0  # requests passed on
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


@contextmanager
def dropping(upstream: str, *drop: str) -> Iterator[_ProxyServer]:
    """A proxy to the store at ``upstream`` that drops the request headers ``drop``; yields
    the proxy (its endpoint ``url``, the count of requests ``forwarded``)."""
    server = _ProxyServer(upstream, frozenset(h.lower() for h in drop))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
