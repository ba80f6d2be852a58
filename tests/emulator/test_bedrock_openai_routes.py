"""Bedrock's Runtime OpenAI API as the emulator serves it (under ``/bedrock-runtime``): the
batch create refused as AWS's page says Bedrock refuses it, no Files API, the key a bearer
token. A batch from S3 to its results in S3 runs in the conformance suite (moto's S3)."""

import httpx
import pytest

from emulator.server import EmulatorServer

HEADERS = {
    "authorization": "Bearer k",
    "x-amzn-bedrock-rolearn": "arn:aws:iam::123456789012:role/batch",
    "x-amzn-bedrock-modelid": "openai.gpt-oss-20b-1:0",
}
CREATE = {
    "input_file_id": "s3://bucket/in.jsonl",
    "endpoint": "/v1/chat/completions",
    "completion_window": "24h",
}


@pytest.mark.parametrize(
    ("drop", "change", "says"),
    [
        ("x-amzn-bedrock-rolearn", {}, "Missing required header: x-amzn-bedrock-rolearn"),
        ("x-amzn-bedrock-modelid", {}, "Missing required header: x-amzn-bedrock-modelid"),
        (None, {"endpoint": "/v1/embeddings"}, "endpoint must be /v1/chat/completions"),
        (None, {"input_file_id": "file-abc"}, "input_file_id must be the S3 URI"),
    ],
)
def test_a_create_bedrock_refuses_is_refused_400(
    emulator: EmulatorServer, drop: str | None, change: dict[str, str], says: str
) -> None:
    headers = {k: v for k, v in HEADERS.items() if k != drop}
    answer = httpx.post(
        f"{emulator.url}/bedrock-runtime/openai/v1/batches",
        json=CREATE | change,
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 400
    assert says in answer.json()["error"]["message"]
    assert emulator.stats()["batches_created"] == 0


def test_no_files_api_and_no_key_no_call(emulator: EmulatorServer) -> None:
    base = f"{emulator.url}/bedrock-runtime/openai/v1"
    assert httpx.get(f"{base}/files", headers=HEADERS, timeout=10).status_code == 404
    assert httpx.get(f"{base}/batches", timeout=10).status_code == 401
    chat = httpx.post(
        f"{base}/chat/completions",
        json={"model": "openai.gpt-oss-20b-1:0", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": "Bearer k"},
        timeout=10,
    )
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"]
