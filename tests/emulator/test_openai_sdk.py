"""The official OpenAI SDK against the emulator, with responses checked against OpenAI's spec."""

import base64
import hashlib
import struct
from typing import Any

import httpx
import openai
import pydantic
import pytest

from emulator.server import EmulatorServer
from emulator.testing import (
    MakeEmulator,
    SchemaCheck,
    chat_body,
    chat_line,
    jsonl,
    openai_client,
    parse_jsonl,
)


def _upload(client: openai.OpenAI, lines: list[dict[str, object]]) -> str:
    return client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch").id


def test_chat_completion_reply_usage_and_schema(
    oai: openai.OpenAI, openai_schema: SchemaCheck
) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}],
            },
        ],
    )
    completion = raw.parse()
    assert raw.headers["x-request-id"].startswith("req_")
    choice = completion.choices[0]
    assert choice.message.content == "echo: hello world"
    assert choice.message.refusal is None
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    # system: tokens("be brief")=2 +3; user: tokens("hello world")=3 +3; priming 3
    assert completion.usage.prompt_tokens == 14
    assert completion.usage.completion_tokens == 5
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 0
    assert completion.usage.completion_tokens_details is not None
    openai_schema("CreateChatCompletionResponse", raw.http_response.json())


class Answer(pydantic.BaseModel):
    answer: str
    score: int
    tags: list[str]
    ok: bool


def test_structured_output_with_parse(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.parse(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "rate this"}],
        response_format=Answer,
    )
    parsed = completion.choices[0].message.parsed
    assert parsed == Answer(answer="echo: rate this", score=1, tags=["echo: rate this"], ok=True)


def test_max_tokens_truncates_with_length(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x" * 100}], max_completion_tokens=2
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == "echo: xx"


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_embeddings(emulator: EmulatorServer, openai_schema: SchemaCheck, encoding: str) -> None:
    body = {
        "model": "text-embedding-3-small",
        "input": ["a", "bb"],
        "encoding_format": encoding,
        "dimensions": 8,
    }
    response = httpx.post(
        f"{emulator.url}/v1/embeddings", json=body, headers={"Authorization": "Bearer k"}
    )
    assert response.status_code == 200
    payload = response.json()
    if encoding == "float":  # the spec only describes float arrays; base64 is a string on the wire
        openai_schema("CreateEmbeddingResponse", payload)
    first = payload["data"][0]["embedding"]
    vector = list(struct.unpack("<8f", base64.b64decode(first))) if encoding == "base64" else first
    assert len(vector) == 8
    assert payload["usage"] == {"prompt_tokens": 2, "total_tokens": 2}


def test_embeddings_via_sdk(oai: openai.OpenAI) -> None:
    result = oai.embeddings.create(model="text-embedding-3-small", input="same text")
    again = oai.embeddings.create(model="text-embedding-3-small", input="same text")
    assert len(result.data[0].embedding) == 16
    assert result.data[0].embedding == pytest.approx(again.data[0].embedding)


def test_files_lifecycle(
    oai: openai.OpenAI, openai_schema: SchemaCheck, emulator: EmulatorServer
) -> None:
    data = jsonl([chat_line("a", "one")])
    created = oai.files.create(file=("in.jsonl", data), purpose="batch")
    assert created.bytes == len(data)
    assert created.purpose == "batch"
    assert oai.files.retrieve(created.id).filename == "in.jsonl"
    assert oai.files.content(created.id).content == data
    headers = {"Authorization": "Bearer k"}
    listed = httpx.get(
        f"{emulator.url}/v1/files", params={"purpose": "batch"}, headers=headers
    ).json()
    openai_schema("ListFilesResponse", listed)
    openai_schema("OpenAIFile", listed["data"][0])
    assert [f.id for f in oai.files.list(purpose="batch")] == [created.id]
    deleted = oai.files.delete(created.id)
    assert deleted.deleted is True
    with pytest.raises(openai.NotFoundError):
        oai.files.retrieve(created.id)


def test_upload_rejects_non_jsonl_for_batch(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"Must be \.jsonl"):
        oai.files.create(file=("input.csv", b"a,b\n"), purpose="batch")


def test_batch_completes_with_real_output_lines(
    oai: openai.OpenAI, openai_schema: SchemaCheck, emulator: EmulatorServer
) -> None:
    file_id = _upload(oai, [chat_line(f"row-{i}", f"question {i}") for i in range(5)])
    batch = oai.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"job": "t1"},
    )
    assert batch.status == "validating"
    assert batch.request_counts is not None and batch.request_counts.total == 0
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed"
    assert done.metadata == {"job": "t1"}
    assert done.request_counts is not None
    assert (
        done.request_counts.total,
        done.request_counts.completed,
        done.request_counts.failed,
    ) == (5, 5, 0)
    assert done.error_file_id is None and done.output_file_id is not None
    assert (
        done.completed_at is not None
        and done.in_progress_at is not None
        and done.finalizing_at is not None
    )
    assert done.usage is not None and done.usage.total_tokens > 0
    raw = httpx.get(
        f"{emulator.url}/v1/batches/{batch.id}", headers={"Authorization": "Bearer k"}
    ).json()
    openai_schema("Batch", raw)
    lines = parse_jsonl(oai.files.content(done.output_file_id).content)
    assert sorted(line["custom_id"] for line in lines) == [f"row-{i}" for i in range(5)]
    for line in lines:
        openai_schema("BatchRequestOutput", line)
        openai_schema("CreateChatCompletionResponse", line["response"]["body"])
        assert line["error"] is None and line["response"]["status_code"] == 200
        number = line["custom_id"].split("-")[1]
        assert (
            line["response"]["body"]["choices"][0]["message"]["content"]
            == f"echo: question {number}"
        )
    output_files = [f.id for f in oai.files.list(purpose="batch_output")]
    assert output_files == [done.output_file_id]


def test_embeddings_batch(oai: openai.OpenAI) -> None:
    line = {
        "custom_id": "e1",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": "text-embedding-3-small", "input": "hi"},
    }
    file_id = _upload(oai, [line])
    batch = oai.batches.create(
        input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h"
    )
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed"
    assert done.output_file_id is not None
    (result,) = parse_jsonl(oai.files.content(done.output_file_id).content)
    assert result["response"]["body"]["object"] == "list"
    assert len(result["response"]["body"]["data"][0]["embedding"]) == 16


def test_list_batches_paginates(
    oai: openai.OpenAI, openai_schema: SchemaCheck, emulator: EmulatorServer
) -> None:
    file_id = _upload(oai, [chat_line("a", "x")])
    ids = [
        oai.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        ).id
        for _ in range(5)
    ]
    page = oai.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2]
    assert page.has_more is True
    assert [b.id for b in oai.batches.list(limit=2)] == ids[::-1]  # auto-pagination follows `after`
    raw = httpx.get(
        f"{emulator.url}/v1/batches",
        params={"limit": 2, "after": ids[1]},
        headers={"Authorization": "Bearer k"},
    ).json()
    openai_schema("ListBatchesResponse", raw)
    assert raw["first_id"] == ids[0] and raw["has_more"] is False


def test_cancel_mid_flight_leaves_partial_results(make_emulator: MakeEmulator) -> None:
    import time

    with make_emulator(batch_seconds=1.0) as server, openai_client(server) as client:
        file_id = _upload(client, [chat_line(f"r{i}", "x") for i in range(100)])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        time.sleep(0.5)
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
        time.sleep(0.15)
        done = client.batches.retrieve(batch.id)
        assert done.status == "cancelled" and done.cancelled_at is not None
        counts = done.request_counts
        assert (
            counts is not None
            and 0 < counts.completed < 100
            and counts.completed + counts.failed == 100
        )
        assert done.error_file_id is not None
        errors = parse_jsonl(client.files.content(done.error_file_id).content)
        assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}
        assert all(e["response"] is None for e in errors)
        with pytest.raises(openai.BadRequestError):
            client.batches.cancel(batch.id)


def test_batch_lifecycle_is_time_driven(make_emulator: MakeEmulator) -> None:
    import time

    with make_emulator(batch_seconds=0.6) as server, openai_client(server) as client:
        file_id = _upload(client, [chat_line("a", "x")])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        seen = [client.batches.retrieve(batch.id).status]
        deadline = time.monotonic() + 5
        while seen[-1] != "completed" and time.monotonic() < deadline:
            time.sleep(0.05)
            status = client.batches.retrieve(batch.id).status
            if status != seen[-1]:
                seen.append(status)
        assert seen == ["validating", "in_progress", "finalizing", "completed"]


def test_create_batch_rejects_bad_requests(oai: openai.OpenAI) -> None:
    file_id = _upload(oai, [chat_line("a", "x")])
    with pytest.raises(openai.BadRequestError, match="Cannot find file"):
        oai.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        oai.batches.create(
            input_file_id=file_id, endpoint="/v1/completions", completion_window="24h"
        )  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        oai.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="1h"
        )  # type: ignore[arg-type]
    other = oai.files.create(file=("notes.jsonl", b"{}\n"), purpose="user_data")
    with pytest.raises(openai.BadRequestError, match="purpose"):
        oai.batches.create(
            input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        oai.batches.retrieve("batch_missing")


def test_auth_required(emulator: EmulatorServer) -> None:
    response = httpx.post(f"{emulator.url}/v1/chat/completions", json=chat_body("x"))
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_a_chat_file_part_takes_an_uploaded_pdfs_file_id(oai: openai.OpenAI) -> None:
    """A PDF uploaded with purpose ``user_data`` goes in a chat ``file`` part by its
    ``file_id``, and the reply names its bytes; an unknown id, a batch file's id, or a file
    URL in the part is refused."""
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
    uploaded = oai.files.create(file=("sheet.pdf", pdf), purpose="user_data")
    batch_file = _upload(oai, [chat_line("r0", "x")])

    def ask(file: dict[str, str]) -> Any:
        part = {"type": "file", "file": file}
        return oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": [{"type": "text", "text": "x"}, part]}],  # type: ignore[list-item]
        )

    reply = ask({"file_id": uploaded.id})
    assert reply.choices[0].message.content is not None
    assert reply.choices[0].message.content.endswith(
        f"[file pdf {hashlib.sha256(pdf).hexdigest()[:12]}]"
    )
    assert reply.usage is not None and reply.usage.prompt_tokens >= 765  # one page
    for refused in (
        {"file_id": "file-nope"},
        {"file_id": batch_file},
        {"filename": "s.pdf", "file_data": "https://example.com/s.pdf"},
    ):
        with pytest.raises(openai.BadRequestError):
            ask(refused)
