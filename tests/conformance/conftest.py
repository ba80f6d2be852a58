"""The servers the conformance suite runs against: one emulator per module (reset before each
test, so each test's counters are its own), moto's S3 server for Bedrock, and a server that
refuses every API key."""

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import boto3
import pytest
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.conformance.cases import BUCKET

AWS_KEYS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
#: the completion windows the vendor profiles create their batches with by default
WINDOWS = ("24h", "7d", "1h")


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """Moto's S3 server with an empty `BUCKET`; this process's AWS keys are moto's while it
    runs (the emulator reads Bedrock's inputs from it in this process)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in AWS_KEYS.items():
            patch.setenv(key, value)
        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"))
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        yield url
    server.stop()


def module_emulator(s3_url: str, **config: object) -> Iterator[EmulatorServer]:
    settings = {"batch_seconds": 0.0, "control_fail": 0.0, "completion_windows": WINDOWS}
    full = EmulatorConfig(s3_endpoint=s3_url, **(settings | config))  # type: ignore[arg-type]
    with EmulatorServer(full) as server:
        yield server


@pytest.fixture(scope="module")
def module_server(s3_url: str) -> Iterator[EmulatorServer]:
    """An emulator whose batches end at once and which injects no fault."""
    yield from module_emulator(s3_url)


@pytest.fixture
def server(module_server: EmulatorServer) -> EmulatorServer:
    """The module's emulator with no batch, file or counter of an earlier test."""
    module_server.reset()
    return module_server


class _Refusing(BaseHTTPRequestHandler):
    """Answers every call 401, as an API answers a key it does not know, and keeps each body
    it was sent."""

    bodies: ClassVar[list[bytes]] = []

    def _refuse(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        type(self).bodies.append(self.rfile.read(length) if length else b"")
        body = (
            b'{"type": "error", "error": {"code": 401, "status": "UNAUTHENTICATED", '
            b'"type": "authentication_error", "message": "Incorrect API key provided"}}'
        )
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _refuse

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def refusing_url() -> Iterator[str]:
    """The base URL of a server that refuses every API key."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def refused_bodies(refusing_url: str) -> list[bytes]:
    """The bodies the refusing server is sent during this test."""
    _Refusing.bodies.clear()
    return _Refusing.bodies
