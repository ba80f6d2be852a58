"""OpenRouter's inline batches through the real wire: what ``--provider openrouter`` does that
the conformance suite (``tests/conformance``, which runs ``openrouter`` and
``openrouter-realtime`` to their end, kills them and cancels them) does not hold every provider
to. Its create body is read as a stream, so ``endpoint`` and ``model`` come before ``requests``
(the emulator refuses it otherwise, as OpenRouter does); its batch API takes text only, so a job
with an image is refused before anything is sent, naming the row and the lane that takes it."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import one_line, table_job

MODEL = "openai/gpt-4o-mini"
PREFIX = "/openrouter/api/v1"
AUTH = {"authorization": "Bearer or-key", "content-type": "application/json"}
ITEM = b'{"custom_id":"r0","body":{"messages":[{"role":"user","content":"hi"}]}}'


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as running:
        yield running


def created(server: EmulatorServer, body: bytes) -> httpx.Response:
    return httpx.post(f"{server.url}{PREFIX}/batches", content=body, headers=AUTH)


def test_a_body_whose_requests_come_before_the_model_is_refused_400(
    server: EmulatorServer,
) -> None:
    server.reset()
    late = b'{"endpoint":"/v1/chat/completions","requests":[' + ITEM + b'],"model":"' + b"m" + b'"}'
    refused = created(server, late)
    assert refused.status_code == 400, refused.text
    assert "before requests" in refused.json()["error"]["message"]
    first = b'{"endpoint":"/v1/chat/completions","model":"m","requests":[' + ITEM + b"]}"
    accepted = created(server, first)
    assert accepted.status_code == 202 and accepted.json()["status"] == "validating"
    assert server.stats()["batches_created"] == 1


def test_a_request_with_an_image_part_is_refused_400(server: EmulatorServer) -> None:
    server.reset()
    image = (
        b'{"custom_id":"r1","body":{"messages":[{"role":"user","content":[{"type":"text",'
        b'"text":"hi"},{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]}]}}'
    )
    body = b'{"endpoint":"/v1/chat/completions","model":"m","requests":[' + ITEM + b"," + image
    refused = created(server, body + b"]}")
    assert refused.status_code == 400, refused.text
    assert "r1" in refused.json()["error"]["message"]
    assert server.stats()["batches_created"] == 0


def test_a_job_with_an_image_is_one_line_and_exit_2_naming_the_row_nothing_sent(
    server: EmulatorServer, tmp_path: Path
) -> None:
    server.reset()
    args = table_job(tmp_path, "enrich", "openrouter", 4, "--image-column", "photo")
    table = Path(args[1])
    photos = [None, None, "https://x.test/a.png", None]
    pl.read_parquet(table).with_columns(pl.Series("photo", photos)).write_parquet(table)
    args[args.index("--model") + 1] = MODEL
    env = {"OPENROUTER_BASE_URL": f"{server.url}{PREFIX}", "OPENROUTER_API_KEY": "or-key"}
    done = maple(*args, clean=True, drop=("OPENROUTER_",), **env)
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert line.startswith("error: Row 2 has an image"), line
    assert "--provider openrouter-realtime" in line
    stats = server.stats()
    assert stats["requests_received"] == 0 and stats["batches_created"] == 0, stats
