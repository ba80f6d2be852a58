"""The official SDK's ``AzureOpenAI`` client against the emulator's Azure routes: it builds
Azure's URLs (``/openai/deployments/{deployment}/...``, ``/openai/files``, ``/openai/batches``),
sends the ``api-key`` header and the ``api-version`` query, and reads the answers."""

import time
from typing import Any

import openai
import pytest

from emulator.server import EmulatorServer
from emulator.testing import chat_body, jsonl, parse_jsonl

VERSION = "2024-10-21"


@pytest.fixture
def azure(emulator: EmulatorServer) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=emulator.url, api_key="azure-key", api_version=VERSION)


def one_line_batch(client: openai.OpenAI, url: str, endpoint: str) -> tuple[Any, str]:
    """A batch of one line to ``url`` created at ``endpoint``, once it has ended, and the id of
    its input file."""
    line = {"custom_id": "r0", "method": "POST", "url": url, "body": chat_body("x")}
    upload = client.files.create(file=("input.jsonl", jsonl([line])), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id,
        endpoint=endpoint,
        completion_window="24h",  # type: ignore[arg-type]
    )
    return ended(client, batch.id), upload.id


def ended(client: openai.OpenAI, batch_id: str) -> Any:
    """The batch ``batch_id`` once it has ended (within 10 s)."""
    deadline = time.monotonic() + 10
    while (batch := client.batches.retrieve(batch_id)).status not in {"failed", "completed"}:
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.05)
    return batch


def test_a_deployments_chat_completion_and_embeddings(azure: openai.AzureOpenAI) -> None:
    completion = azure.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
    )
    assert completion.choices[0].message.content == "echo: hello"
    assert completion.model == "gpt-4o-mini"
    vectors = azure.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
    assert len(vectors.data) == 2 and vectors.usage.prompt_tokens > 0


def test_a_global_batch_from_upload_to_results(azure: openai.AzureOpenAI) -> None:
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/chat/completions",
         "body": chat_body(f"item {i}")}
        for i in range(3)
    ]  # fmt: skip
    upload = azure.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    batch = azure.batches.create(
        input_file_id=upload.id, endpoint="/chat/completions", completion_window="24h"
    )
    assert batch.endpoint == "/chat/completions"
    batch = ended(azure, batch.id)
    assert batch.status == "completed" and batch.output_file_id is not None
    answers = parse_jsonl(azure.files.content(batch.output_file_id).content)
    assert sorted(a["custom_id"] for a in answers) == ["r0", "r1", "r2"]
    assert {a["response"]["status_code"] for a in answers} == {200}
    assert [b.id for b in azure.batches.list()] == [batch.id]


def test_a_line_whose_url_is_not_the_batch_endpoint_fails_the_batch(
    azure: openai.AzureOpenAI,
) -> None:
    batch, _ = one_line_batch(azure, "/v1/chat/completions", "/chat/completions")
    assert batch.status == "failed" and batch.errors is not None
    assert [e.code for e in batch.errors.data or []] == ["url_mismatch"]


def test_the_v1_api_by_the_openai_client_a_batch_and_a_chat_completion(
    emulator: EmulatorServer,
) -> None:
    """The v1 API as Microsoft's page shows it (the OpenAI client at ``/openai/v1/``, the key
    as its ``api_key``): OpenAI's endpoints, no ``api-version``."""
    v1 = openai.OpenAI(base_url=f"{emulator.url}/openai/v1/", api_key="azure-key")
    completion = v1.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
    )
    assert completion.choices[0].message.content == "echo: hello"
    batch, upload = one_line_batch(v1, "/v1/chat/completions", "/v1/chat/completions")
    assert batch.status == "completed" and batch.output_file_id is not None
    answers = parse_jsonl(v1.files.content(batch.output_file_id).content)
    assert [a["response"]["status_code"] for a in answers] == [200]
    with pytest.raises(openai.BadRequestError):  # the dated paths' endpoint is not v1's
        v1.batches.create(
            input_file_id=upload, endpoint="/chat/completions", completion_window="24h"
        )
