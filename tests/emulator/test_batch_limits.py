"""OpenAI batch validation: create answers 200 ``validating``; the batch then ``failed``."""

import openai
import orjson
import pytest

from emulator.server import EmulatorServer
from emulator.testing import MakeEmulator, chat_line, jsonl, openai_client


def _failed_errors(client: openai.OpenAI, data: bytes) -> list[dict[str, object]]:
    file_id = client.files.create(file=("in.jsonl", data), purpose="batch").id
    created = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert created.status == "validating"
    batch = client.batches.retrieve(created.id)
    assert batch.status == "failed"
    assert batch.failed_at is not None and batch.output_file_id is None and batch.errors is not None
    assert batch.errors.data is not None
    return [error.model_dump() for error in batch.errors.data]


def test_invalid_json_line_reports_its_line(oai: openai.OpenAI) -> None:
    data = jsonl([chat_line("a", "x")]) + b"{not json\n"
    (error,) = _failed_errors(oai, data)
    assert error["code"] == "invalid_json_line" and error["line"] == 2


def test_duplicate_custom_id(oai: openai.OpenAI) -> None:
    errors = _failed_errors(oai, jsonl([chat_line("a", "x"), chat_line("a", "y")]))
    assert [(e["code"], e["line"]) for e in errors] == [("duplicate_custom_id", 2)]


def test_url_mismatch(oai: openai.OpenAI) -> None:
    line = chat_line("a", "x") | {"url": "/v1/embeddings"}
    assert [e["code"] for e in _failed_errors(oai, jsonl([line]))] == ["url_mismatch"]


def test_model_mismatch(oai: openai.OpenAI) -> None:
    lines = [chat_line("a", "x", model="gpt-4o-mini"), chat_line("b", "x", model="gpt-4o")]
    assert [e["code"] for e in _failed_errors(oai, jsonl(lines))] == ["model_mismatch"]


def test_empty_file(oai: openai.OpenAI) -> None:
    assert [e["code"] for e in _failed_errors(oai, b"\n")] == ["empty_file"]


def test_too_many_tasks_at_the_real_limit(oai: openai.OpenAI) -> None:
    line = orjson.dumps(chat_line("x", "x"))
    data = b"".join(line.replace(b'"x"', f'"r{i}"'.encode(), 1) + b"\n" for i in range(50_001))
    assert [e["code"] for e in _failed_errors(oai, data)] == ["too_many_tasks"]


def test_file_too_large(make_emulator: MakeEmulator) -> None:
    with make_emulator(openai_max_bytes=1000) as server, openai_client(server) as client:
        data = jsonl([chat_line(f"r{i}", "x" * 50) for i in range(20)])
        assert [e["code"] for e in _failed_errors(client, data)] == ["file_too_large"]


def test_unknown_routes_and_methods_get_json_errors(emulator: EmulatorServer) -> None:
    import httpx

    headers = {"Authorization": "Bearer k"}
    missing = httpx.get(f"{emulator.url}/v1/nothing", headers=headers)
    assert missing.status_code == 404 and "error" in missing.json()
    wrong = httpx.delete(f"{emulator.url}/v1/batches", headers=headers)
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "invalid_request_error"
    bad = httpx.post(f"{emulator.url}/v1/batches", content=b"{", headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith(
        "We could not parse"
    )
    anthropic_missing = httpx.get(
        f"{emulator.url}/v1/messages/batches/nope",
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert anthropic_missing.status_code == 404
    assert anthropic_missing.json()["error"]["type"] == "not_found_error"
    assert anthropic_missing.headers["request-id"].startswith("req_")


@pytest.mark.parametrize("purpose", ["nonsense"])
def test_upload_rejects_unknown_purpose(oai: openai.OpenAI, purpose: str) -> None:
    with pytest.raises(openai.BadRequestError, match="purpose"):
        oai.files.create(file=("in.jsonl", b"{}\n"), purpose=purpose)  # type: ignore[arg-type]
