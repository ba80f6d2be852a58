"""Real-time rate limiting, its headers, and the stats counters (incl. the paid-twice detector)."""

import re
import time

import anthropic
import httpx
import openai
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from emulator.testing import (
    MakeEmulator,
    anthropic_client,
    chat_body,
    chat_line,
    jsonl,
    message_request,
    openai_client,
)

OPENAI_HEADERS = {"Authorization": "Bearer k"}
ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _wait_for_fresh_window() -> None:
    time.sleep(1.0 - time.time() % 1.0 + 0.01)


def test_openai_rate_limit_headers_and_429(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(rpm=180) as server,
        httpx.Client(base_url=server.url, headers=OPENAI_HEADERS) as http,
    ):
        _wait_for_fresh_window()
        responses = [http.post("/v1/chat/completions", json=chat_body("x")) for _ in range(4)]
        assert [r.status_code for r in responses] == [200, 200, 200, 429]
        first, limited = responses[0], responses[3]
        assert first.headers["x-ratelimit-limit-requests"] == "180"
        assert re.fullmatch(r"\d+(ms|s)", first.headers["x-ratelimit-reset-requests"])
        assert int(first.headers["x-ratelimit-remaining-requests"]) > int(
            responses[2].headers["x-ratelimit-remaining-requests"]
        )
        for header in ("limit", "remaining", "reset"):
            assert f"x-ratelimit-{header}-tokens" in limited.headers
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert 0 < float(limited.headers["retry-after-ms"]) <= 1000
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.headers["x-request-id"]
        assert server.stats()["realtime_429"] == 1


def test_sdk_retries_through_the_limit(make_emulator: MakeEmulator) -> None:
    with make_emulator(rpm=120) as server, openai_client(server, max_retries=5) as client:
        for _ in range(4):
            assert (
                client.chat.completions.create(**chat_body("x")).choices[0].message.content
                == "echo: x"
            )
        stats = server.stats()
        assert stats["requests_billed"] == 4 and stats["realtime_429"] >= 1


def test_token_limit_and_too_large(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(tpm=1200) as server,
        httpx.Client(base_url=server.url, headers=OPENAI_HEADERS) as http,
    ):
        _wait_for_fresh_window()
        statuses = [
            http.post("/v1/chat/completions", json=chat_body("x")).status_code for _ in range(3)
        ]
        assert statuses == [200, 200, 429]  # 20 tokens per second; each request needs 8 + 2
        huge = http.post("/v1/chat/completions", json=chat_body("x" * 400))
        assert huge.status_code == 429 and huge.headers["x-should-retry"] == "false"
        assert "Request too large" in huge.json()["error"]["message"]


def test_anthropic_rate_limit_headers(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(rpm=60) as server,
        httpx.Client(base_url=server.url, headers=ANTHROPIC_HEADERS) as http,
    ):
        _wait_for_fresh_window()
        body = message_request("a", "x")["params"]
        ok, limited = http.post("/v1/messages", json=body), http.post("/v1/messages", json=body)
        assert ok.status_code == 200 and limited.status_code == 429
        for family in ("requests", "tokens", "input-tokens", "output-tokens"):
            for part in ("limit", "remaining", "reset"):
                assert f"anthropic-ratelimit-{family}-{part}" in ok.headers
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z",
            ok.headers["anthropic-ratelimit-requests-reset"],
        )
        assert limited.json()["error"]["type"] == "rate_limit_error"
        assert limited.headers["retry-after"] and limited.headers["request-id"]


def test_headers_present_without_limits(emulator: EmulatorServer) -> None:
    response = httpx.post(
        f"{emulator.url}/v1/chat/completions", json=chat_body("x"), headers=OPENAI_HEADERS
    )
    assert (
        response.headers["x-ratelimit-limit-requests"]
        and response.headers["x-ratelimit-remaining-tokens"]
    )


def test_stats_count_and_detect_double_billing(
    emulator: EmulatorServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    data = jsonl([chat_line("a", "x"), chat_line("b", "y")])
    for _ in range(2):  # the same rows submitted twice are billed twice
        file_id = oai.files.create(file=("in.jsonl", data), purpose="batch").id
        created = oai.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert oai.batches.retrieve(created.id).status == "completed"
    oai.chat.completions.create(**chat_body("rt"))
    claude.messages.create(**message_request("m", "z")["params"])
    stats = emulator.stats()
    assert stats["files_uploaded"] == 2
    assert stats["batches_created"] == 2
    assert stats["requests_received"] == 6
    assert stats["requests_billed"] == 6
    assert stats["bodies_billed_twice"] == 2
    assert stats["realtime_requests"] == 2
    assert stats["realtime_429"] == 0
    emulator.reset()
    assert emulator.stats()["requests_billed"] == 0


def test_same_body_different_custom_id_is_not_double_billing(
    oai: openai.OpenAI, emulator: EmulatorServer
) -> None:
    for custom_id in ("a", "b"):
        file_id = oai.files.create(
            file=("in.jsonl", jsonl([chat_line(custom_id, "x")])), purpose="batch"
        ).id
        oai.batches.retrieve(
            oai.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            ).id
        )
    assert emulator.stats()["bodies_billed_twice"] == 0


@pytest.mark.parametrize("count", [3])
def test_anthropic_batch_counts_in_stats(
    claude: anthropic.Anthropic, emulator: EmulatorServer, count: int
) -> None:
    created = claude.messages.batches.create(
        requests=[message_request(f"r{i}", "x") for i in range(count)]
    )  # type: ignore[misc]
    claude.messages.batches.retrieve(created.id)
    stats = emulator.stats()
    assert (stats["batches_created"], stats["requests_received"], stats["requests_billed"]) == (
        1,
        count,
        count,
    )


def test_anthropic_client_factory(emulator: EmulatorServer) -> None:
    with anthropic_client(emulator) as client:
        assert client.messages.create(**message_request("a", "ping")["params"]).content


def test_realtime_answers_take_the_configured_latency(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(realtime_latency_s=(0.2, 0.3)) as server,
        httpx.Client(base_url=server.url, headers=OPENAI_HEADERS) as http,
    ):
        took = []
        for _ in range(3):
            started = time.monotonic()
            assert http.post("/v1/chat/completions", json=chat_body("x")).status_code == 200
            took.append(time.monotonic() - started)
        started = time.monotonic()
        body = message_request("m", "x")["params"]
        answer = http.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
        assert answer.status_code == 200
        took.append(time.monotonic() - started)
    assert all(0.2 <= t < 1.5 for t in took), took
    with pytest.raises(ValueError, match="LOW-HIGH"):
        EmulatorConfig(realtime_latency_s=(0.5, 0.2))
