"""What each provider refuses, over HTTP: the emulator answers as the vendor's API does (its
status, its error shape, its message), in real time and inside a batch's results. The rules
and the vendor pages they follow sit beside them in ``emulator/<provider>/engine.py``."""

from typing import Any

import httpx
import openai
import pytest

from emulator.server import EmulatorServer
from emulator.testing import jsonl, message_request, openai_client, parse_jsonl

ADA = "text-embedding-ada-002"
NO_DIMENSIONS = {
    "error": {
        "message": "This model does not support specifying dimensions.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
#: the API version whose Messages requests still take temperature, top_p and top_k
ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _embed(server: EmulatorServer, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "input": "hello", **extra}
    auth = {"authorization": "Bearer k"}
    return httpx.post(f"{server.url}/v1/embeddings", json=body, headers=auth)


def test_ada_002_refuses_dimensions_in_real_time(emulator: EmulatorServer) -> None:
    refused = _embed(emulator, ADA, dimensions=256)
    assert refused.status_code == 400
    assert refused.json() == NO_DIMENSIONS
    assert _embed(emulator, ADA, dimensions=None).status_code == 400  # named at all
    assert _embed(emulator, ADA).status_code == 200
    shortened = _embed(emulator, "text-embedding-3-small", dimensions=256)
    assert len(shortened.json()["data"][0]["embedding"]) == 256
    with openai_client(emulator) as client, pytest.raises(openai.BadRequestError, match="dimen"):
        client.embeddings.create(model=ADA, input="hello", dimensions=256)
    assert emulator.stats()["requests_billed"] == 2  # the two answered 200


def test_ada_002_refuses_dimensions_inside_a_batch(emulator: EmulatorServer) -> None:
    """The batch completes: the line naming ``dimensions`` is in the error file with the API's
    400, the other one (one model per batch, as OpenAI requires) in the output."""
    bodies = {"sized": {"dimensions": 256}, "plain": {}}
    lines = [
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": ADA, "input": "hello", **extra},
        }
        for custom_id, extra in bodies.items()
    ]
    with openai_client(emulator) as client:
        upload = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        done = client.batches.retrieve(batch.id)
        assert done.status == "completed"
        assert done.request_counts is not None and done.request_counts.failed == 1
        assert done.error_file_id is not None and done.output_file_id is not None
        (error,) = parse_jsonl(client.files.content(done.error_file_id).content)
        (output,) = parse_jsonl(client.files.content(done.output_file_id).content)
    assert error["custom_id"] == "sized"
    assert error["response"]["status_code"] == 400
    assert error["response"]["body"] == NO_DIMENSIONS
    assert output["custom_id"] == "plain"
    assert output["response"]["status_code"] == 200


def _thinking(**extra: Any) -> dict[str, Any]:
    params = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "hi"}],
    }
    return {**params, **extra}


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (_thinking(temperature=0.5), "`temperature` may only be set to 1 when thinking"),
        (_thinking(top_k=5), "`top_k` must be unset when thinking is enabled"),
        (_thinking(top_p=0.5), "`top_p` must be greater than or equal to 0.95"),
        (_thinking(max_tokens=2048), "`max_tokens` must be greater than `thinking.budget_tokens`"),
        (
            _thinking(thinking={"type": "enabled", "budget_tokens": 512}),
            "budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            _thinking(tool_choice={"type": "any"}),
            "Thinking may not be enabled when tool_choice forces tool use",
        ),
        (
            _thinking(model="claude-3-5-haiku-20241022"),
            "claude-3-5-haiku-20241022 does not support extended thinking",
        ),
    ],
)
def test_extended_thinking_refuses_what_anthropic_refuses(
    emulator: EmulatorServer, params: dict[str, Any], says: str
) -> None:
    refused = httpx.post(f"{emulator.url}/v1/messages", json=params, headers=ANTHROPIC)
    assert refused.status_code == 400
    body = refused.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert says in body["error"]["message"]


@pytest.mark.parametrize(
    "params",
    [
        _thinking(),
        _thinking(temperature=1, top_p=0.95),
        _thinking(thinking={"type": "disabled"}, temperature=0.2, top_k=5),
    ],
)
def test_extended_thinking_takes_what_anthropic_takes(
    emulator: EmulatorServer, params: dict[str, Any]
) -> None:
    answer = httpx.post(f"{emulator.url}/v1/messages", json=params, headers=ANTHROPIC)
    assert answer.status_code == 200, answer.text


def test_a_batch_request_with_a_refused_thinking_errors_on_its_own(
    emulator: EmulatorServer,
) -> None:
    """A batch's params are validated as each request runs: the batch is created, the refused
    request ends ``errored`` with the API's 400 error, the other one succeeds."""
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    requests = [
        message_request("hot", "hi", max_tokens=4096, temperature=0.5, **thinking),
        message_request("ok", "hi", max_tokens=4096, **thinking),
    ]
    url = f"{emulator.url}/v1/messages/batches"
    created = httpx.post(url, json={"requests": requests}, headers=ANTHROPIC)
    assert created.status_code == 200, created.text
    batch_id = created.json()["id"]
    assert httpx.get(f"{url}/{batch_id}", headers=ANTHROPIC).json()["request_counts"] == {
        "processing": 0,
        "succeeded": 1,
        "errored": 1,
        "canceled": 0,
        "expired": 0,
    }
    lines = parse_jsonl(httpx.get(f"{url}/{batch_id}/results", headers=ANTHROPIC).content)
    results = {line["custom_id"]: line["result"] for line in lines}
    assert results["ok"]["type"] == "succeeded"
    assert results["hot"]["type"] == "errored"
    error = results["hot"]["error"]
    assert error["error"]["type"] == "invalid_request_error"
    assert "`temperature` may only be set to 1" in error["error"]["message"]


def _chat(path: str, **body: Any) -> dict[str, Any]:
    if path == "/v1/chat/completions":
        return {"messages": [{"role": "user", "content": "hi"}], **body}
    return {"input": "hi", **body}


@pytest.mark.parametrize(
    ("path", "body", "param", "says"),
    [
        (
            "/v1/chat/completions",
            _chat("/v1/chat/completions", model="o3", temperature=0.2),
            "temperature",
            "Unsupported value: 'temperature' does not support 0.2 with this model. Only the "
            "default (1) value is supported.",
        ),
        (
            "/v1/responses",
            _chat("/v1/responses", model="gpt-5", top_p=0.5, reasoning={"effort": "low"}),
            "top_p",
            "'top_p' does not support 0.5",
        ),
        (
            "/v1/chat/completions",
            _chat("/v1/chat/completions", model="gpt-5-mini", presence_penalty=0.5),
            "presence_penalty",
            "Unsupported parameter: 'presence_penalty' is not supported with this model.",
        ),
        (
            "/v1/responses",
            _chat("/v1/responses", model="gpt-5", reasoning="high"),
            "reasoning",
            "Invalid type for 'reasoning': expected an object, but got a string instead.",
        ),
        (
            "/v1/chat/completions",
            _chat("/v1/chat/completions", model="o4-mini", reasoning_effort="extreme"),
            "reasoning_effort",
            "Invalid value: 'extreme'.",
        ),
    ],
)
def test_a_reasoning_model_refuses_what_openai_refuses(
    emulator: EmulatorServer, path: str, body: dict[str, Any], param: str, says: str
) -> None:
    refused = httpx.post(f"{emulator.url}{path}", json=body, headers={"authorization": "Bearer k"})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == param and says in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        _chat("/v1/chat/completions", model="o3", temperature=1, top_p=1),
        _chat("/v1/chat/completions", model="gpt-5.2", reasoning_effort="none", temperature=0.2),
        _chat("/v1/chat/completions", model="gpt-4o-mini", temperature=0.2, logprobs=True),
    ],
)
def test_a_reasoning_model_takes_its_defaults_and_other_models_their_sampling(
    emulator: EmulatorServer, body: dict[str, Any]
) -> None:
    url = f"{emulator.url}/v1/chat/completions"
    answer = httpx.post(url, json=body, headers={"authorization": "Bearer k"})
    assert answer.status_code == 200, answer.text
