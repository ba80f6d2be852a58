"""The providers' queue limits: OpenAI's enqueued-token limit and Anthropic's queue limit."""

import time

import anthropic
import httpx
import openai
import pytest

from emulator.testing import MakeEmulator, chat_line, jsonl, message_request, openai_client

# "x" * 40 is 10 tokens + 3 per message + 3 priming = 16 prompt tokens per line.
LINE_TOKENS = 16


def _create(client: openai.OpenAI, prefix: str, lines: int) -> str:
    data = jsonl([chat_line(f"{prefix}{i}", "x" * 40) for i in range(lines)])
    file_id = client.files.create(file=("in.jsonl", data), purpose="batch").id
    batch = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return batch.id


def _wait_status(client: openai.OpenAI, batch_id: str, wanted: set[str]) -> openai.types.Batch:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in wanted:
            return batch
        time.sleep(0.05)
    raise AssertionError(f"{batch_id} never reached {wanted}")


def test_batch_past_the_enqueued_token_limit_fails_like_openai(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(batch_seconds=1.0, enqueued_token_limit=5 * LINE_TOKENS) as server,
        openai_client(server) as client,
    ):
        first = _create(client, "a", 3)
        _wait_status(client, first, {"in_progress"})
        second = _create(client, "b", 3)  # 3 + 3 lines > 5: fails at validation
        failed = _wait_status(client, second, {"failed", "completed"})
        assert failed.status == "failed" and failed.errors and failed.errors.data
        error = failed.errors.data[0]
        assert error.code == "token_limit_exceeded"
        assert error.message == (
            "Enqueued token limit reached for gpt-4o-mini in organization org-emulator. "
            "Limit: 80 enqueued tokens. Please try submitting your batch again later."
        )
        assert failed.output_file_id is None
        _wait_status(client, first, {"completed"})
        third = _create(client, "c", 5)  # the queue is empty again: exactly at the limit
        assert _wait_status(client, third, {"failed", "completed"}).status == "completed"
        stats = httpx.get(f"{server.url}/_emulator/stats").json()
    assert stats["max_enqueued_tokens"] == 5 * LINE_TOKENS
    assert stats["batches_failed_token_limit"] == 1
    assert stats["requests_billed"] == 8  # the failed batch billed nothing


def test_anthropic_create_past_the_queue_limit_is_a_429(make_emulator: MakeEmulator) -> None:
    with make_emulator(batch_seconds=0.5, anthropic_queue_limit=3) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        client.messages.batches.create(requests=[message_request(f"a{i}", "x") for i in range(2)])
        with pytest.raises(anthropic.RateLimitError) as caught:
            client.messages.batches.create(
                requests=[message_request(f"b{i}", "x") for i in range(2)]
            )
        body = caught.value.body
        assert isinstance(body, dict) and body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        assert "queue" in body["error"]["message"]
        time.sleep(0.6)  # the first batch ended: room again
        client.messages.batches.create(requests=[message_request(f"c{i}", "x") for i in range(3)])
        stats = httpx.get(f"{server.url}/_emulator/stats").json()
    assert stats["anthropic_queue_429"] == 1
