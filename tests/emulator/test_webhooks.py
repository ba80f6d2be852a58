"""``--webhook-url``/``--webhook-secret``: when an OpenAI batch ends, the emulator pushes
OpenAI's event, signed so that the official SDK's ``webhooks.unwrap`` accepts it, without
being polled; a Mistral job (OpenAI's batch engine, not OpenAI's API) pushes none."""

import base64
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

from emulator.testing import MakeEmulator, chat_line, jsonl, openai_client

SECRET = "whsec_" + base64.b64encode(b"emulator-webhook-test-key-32byte").decode()


@contextmanager
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    """A plain HTTP endpoint on 127.0.0.1 that answers 200 and keeps each delivery."""
    got: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            got.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(got: list[object], count: int) -> None:
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_ended_batches_push_events_the_sdk_verifies(make_emulator: MakeEmulator) -> None:
    with (
        receiver() as (url, got),
        make_emulator(batch_seconds=0.5, webhook_url=url, webhook_secret=SECRET) as server,
        openai_client(server) as client,
    ):
        file_id = client.files.create(
            file=("in.jsonl", jsonl([chat_line(f"r{i}", "x") for i in range(3)])), purpose="batch"
        ).id
        made = [
            client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            for _ in range(2)
        ]
        client.batches.cancel(made[1].id)
        _wait_for(got, 2)  # never polled: the batches end on the emulator's own clock
        stats = server.stats()
    assert stats["webhooks_sent"] == 2 and stats["batch_retrievals"] == 0
    sdk = openai.OpenAI(api_key="unused", webhook_secret=SECRET)
    events = {e.data.id: e.type for e in (sdk.webhooks.unwrap(b, h) for h, b in got)}
    assert events == {made[0].id: "batch.completed", made[1].id: "batch.cancelled"}
    assert all(h["webhook-id"].startswith("wh_") for h, _ in got)


@pytest.mark.slow  # 7.5 s of retries
def test_a_refusing_endpoint_is_retried_then_counted_failed(make_emulator: MakeEmulator) -> None:
    nowhere = "http://127.0.0.1:9/none"  # the discard port: connection refused
    with (
        make_emulator(batch_seconds=0.2, webhook_url=nowhere, webhook_secret=SECRET) as server,
        openai_client(server) as client,
    ):
        file_id = client.files.create(
            file=("in.jsonl", jsonl([chat_line("r", "x")])), purpose="batch"
        ).id
        client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 15
        while not server.stats()["webhooks_failed"] and time.monotonic() < deadline:
            time.sleep(0.2)
        stats = server.stats()
    assert stats["webhooks_failed"] == 1 and stats["webhooks_sent"] == 0
