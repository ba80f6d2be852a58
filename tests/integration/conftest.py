"""Fixtures for the integration tests: moto's S3 server on 127.0.0.1 (the real S3 API)."""

import urllib.request
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

BUCKET = "maple-test"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An empty bucket ``BUCKET`` on a fresh moto server; the AWS variables point at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # moto keeps its buckets in process-wide memory: start every test from an empty S3.
    reset = urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).read()
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)
    yield env
    server.stop()
