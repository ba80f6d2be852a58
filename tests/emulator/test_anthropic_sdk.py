"""The official Anthropic SDK against the emulator: messages and message batches."""

import time

import anthropic
import httpx
import pytest

from emulator.server import EmulatorServer
from emulator.testing import MakeEmulator, anthropic_client, message_request


def test_messages_create(claude: anthropic.Anthropic) -> None:
    raw = claude.messages.with_raw_response.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        system="be brief",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "you"}],
            }
        ],
    )
    message = raw.parse()
    assert raw.headers["request-id"].startswith("req_")
    assert raw.headers["anthropic-ratelimit-requests-limit"]
    assert message.content[0].type == "text" and message.content[0].text == "echo: hi you"
    assert message.stop_reason == "end_turn"
    # system: tokens("be brief")=2 +3; user: tokens("hi you")=2 +3; priming 3
    assert (message.usage.input_tokens, message.usage.output_tokens) == (13, 3)


def test_messages_structured_output(claude: anthropic.Anthropic) -> None:
    schema = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["pos", "neg"]},
            "n": {"type": "integer"},
        },
        "required": ["label", "n"],
    }
    message = claude.messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "classify"}],
        extra_body={"output_format": {"type": "json_schema", "schema": schema}},
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == '{"label":"pos","n":1}'


def test_batch_lifecycle_and_results(claude: anthropic.Anthropic, emulator: EmulatorServer) -> None:
    created = claude.messages.batches.create(
        requests=[message_request(f"r-{i}", f"q{i}") for i in range(3)]
    )  # type: ignore[misc]
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 3
    batch = claude.messages.batches.retrieve(created.id)
    assert batch.processing_status == "ended" and batch.ended_at is not None
    assert batch.request_counts.succeeded == 3
    assert batch.results_url == f"{emulator.url}/v1/messages/batches/{created.id}/results"
    results = {r.custom_id: r.result for r in claude.messages.batches.results(created.id)}
    assert set(results) == {"r-0", "r-1", "r-2"}
    first = results["r-0"]
    assert first.type == "succeeded"
    assert first.message.content[0].type == "text" and first.message.content[0].text == "echo: q0"
    assert first.message.usage.service_tier == "batch"


def test_batch_list_pagination(claude: anthropic.Anthropic) -> None:
    ids = [
        claude.messages.batches.create(requests=[message_request("a", "x")]).id for _ in range(3)
    ]  # type: ignore[misc]
    page = claude.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2]
    assert page.has_more is True and page.last_id == ids[1]
    assert [b.id for b in claude.messages.batches.list(limit=2)] == ids[::-1]


def test_cancel_mid_flight(make_emulator: MakeEmulator) -> None:
    with make_emulator(batch_seconds=1.0) as server, anthropic_client(server) as client:
        batch = client.messages.batches.create(
            requests=[message_request(f"r{i}", "x") for i in range(50)]
        )  # type: ignore[misc]
        time.sleep(0.4)
        canceling = client.messages.batches.cancel(batch.id)
        assert (
            canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
        )
        time.sleep(0.15)
        ended = client.messages.batches.retrieve(batch.id)
        counts = ended.request_counts
        assert ended.processing_status == "ended"
        assert 0 < counts.canceled < 50 and counts.succeeded + counts.canceled == 50
        kinds = {r.result.type for r in client.messages.batches.results(batch.id)}
        assert kinds == {"succeeded", "canceled"}


@pytest.mark.parametrize(
    ("requests", "fragment"),
    [
        ([message_request("bad id!", "x")], "custom_id"),
        ([message_request("a", "x"), message_request("a", "y")], "Duplicate"),
        (
            [
                {
                    "custom_id": "a",
                    "params": {"model": "c", "messages": [{"role": "user", "content": "x"}]},
                }
            ],
            "max_tokens",
        ),
        ([], "at least 1"),
    ],
)
def test_batch_create_validation(
    claude: anthropic.Anthropic, requests: list[dict[str, object]], fragment: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=fragment) as raised:
        claude.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    assert raised.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


def test_batch_request_limit(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(anthropic_max_requests=2) as server,
        anthropic_client(server) as client,
        pytest.raises(anthropic.BadRequestError, match="at most 2"),
    ):
        client.messages.batches.create(requests=[message_request(f"r{i}", "x") for i in range(3)])  # type: ignore[misc]


def test_batch_size_limit(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(anthropic_max_bytes=500) as server,
        anthropic_client(server) as client,
        pytest.raises(anthropic.APIStatusError) as raised,
    ):
        client.messages.batches.create(
            requests=[message_request(f"r{i}", "x" * 100) for i in range(5)]
        )  # type: ignore[misc]
    assert raised.value.status_code == 413


def test_auth_errors(emulator: EmulatorServer) -> None:
    body = message_request("a", "x")["params"]
    no_key = httpx.post(
        f"{emulator.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}
    )
    assert no_key.status_code == 401
    assert (
        no_key.json()["type"] == "error"
        and no_key.json()["error"]["type"] == "authentication_error"
    )
    no_version = httpx.post(f"{emulator.url}/v1/messages", json=body, headers={"x-api-key": "k"})
    assert no_version.status_code == 400
    missing_max_tokens = httpx.post(
        f"{emulator.url}/v1/messages",
        json={"model": "c", "messages": [{"role": "user", "content": "x"}]},
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    assert (
        missing_max_tokens.status_code == 400
        and "max_tokens" in missing_max_tokens.json()["error"]["message"]
    )


def test_api_version_2026_10_21_refuses_the_sampling_parameters(
    claude: anthropic.Anthropic, emulator: EmulatorServer
) -> None:
    """The SDK sends anthropic-version 2026-10-21, which removed temperature, top_p and top_k
    (its create() takes none of them any more); under 2023-06-01 they are taken. An unknown
    version is refused."""
    ask = {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with pytest.raises(anthropic.BadRequestError, match="temperature"):
        claude.messages.create(**ask, extra_body={"temperature": 0.5})  # type: ignore[call-overload]
    assert claude.messages.create(**ask).content[0].text == "echo: hi"  # type: ignore[call-overload, union-attr]
    old = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    body = {**ask, "temperature": 0.5}
    assert httpx.post(f"{emulator.url}/v1/messages", json=body, headers=old).status_code == 200
    batch = {"requests": [{"custom_id": "a", "params": body}]}
    new = {**old, "anthropic-version": "2026-10-21"}
    refused = httpx.post(f"{emulator.url}/v1/messages/batches", json=batch, headers=new)
    assert refused.status_code == 400 and "temperature" in refused.text
    unknown = httpx.post(
        f"{emulator.url}/v1/messages", json=ask, headers={**old, "anthropic-version": "2024-01-01"}
    )
    assert unknown.status_code == 400 and "not a valid version" in unknown.text
