"""Each fault class at rate 1.0 has the provider's wire shape; transient ones clear on retry."""

import time

import anthropic
import httpx
import openai
import pytest

from emulator.testing import (
    MakeEmulator,
    SchemaCheck,
    anthropic_client,
    chat_body,
    chat_line,
    jsonl,
    message_request,
    openai_client,
    parse_jsonl,
)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
JSON_SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "A", "schema": SCHEMA, "strict": True},
}
IMAGE_MESSAGE = {
    "role": "user",
    "content": [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
    ],
}


def _run_batch(
    client: openai.OpenAI, lines: list[dict[str, object]]
) -> tuple[openai.types.Batch, list[dict[str, object]], list[dict[str, object]]]:
    file_id = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch").id
    created = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    batch = client.batches.retrieve(created.id)
    out = (
        parse_jsonl(client.files.content(batch.output_file_id).content)
        if batch.output_file_id
        else []
    )
    err = (
        parse_jsonl(client.files.content(batch.error_file_id).content)
        if batch.error_file_id
        else []
    )
    return batch, out, err


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ("rate_limited", 429, "rate_limit_exceeded"),
        ("insufficient_quota", 429, "insufficient_quota"),
        ("server_error", 500, None),
        ("invalid_request", 400, None),
    ],
)
def test_batch_http_faults(
    make_emulator: MakeEmulator,
    openai_schema: SchemaCheck,
    fault: str,
    status: int,
    code: str | None,
) -> None:
    with (
        make_emulator(fail={fault: 1.0}, control_fail=0.0) as server,
        openai_client(server) as client,
    ):
        batch, out, err = _run_batch(client, [chat_line("a", "x"), chat_line("b", "y")])
        assert batch.status == "completed" and out == [] and batch.output_file_id is None
        assert batch.request_counts is not None and batch.request_counts.failed == 2
        for line in err:
            openai_schema("BatchRequestOutput", line)
            assert line["error"] is None
            response = line["response"]
            assert isinstance(response, dict) and response["status_code"] == status
            assert response["body"]["error"]["code"] == code
        assert server.stats()[f"fault_{fault}"] == 2


def test_realtime_faults(make_emulator: MakeEmulator) -> None:
    with make_emulator(fail={"rate_limited": 1.0}) as server, openai_client(server) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(**chat_body("x"))
        assert raised.value.code == "rate_limit_exceeded"
        assert raised.value.response.headers["retry-after"]
        assert server.stats()["realtime_429"] == 1
    with (
        make_emulator(fail={"server_error": 1.0}, control_fail=0.0) as server,
        anthropic_client(server) as client,
        pytest.raises(anthropic.InternalServerError) as failed,
    ):
        client.messages.create(**message_request("a", "x")["params"])
    assert failed.value.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_refused_is_sticky_and_shaped(
    make_emulator: MakeEmulator, openai_schema: SchemaCheck
) -> None:
    with make_emulator(fail={"refused": 1.0}) as server, openai_client(server) as client:
        for _ in range(2):
            completion = client.chat.completions.create(**chat_body("x"))
            message = completion.choices[0].message
            assert message.content is None and message.refusal
        raw = httpx.post(
            f"{server.url}/v1/chat/completions",
            json=chat_body("x"),
            headers={"Authorization": "Bearer k"},
        )
        openai_schema("CreateChatCompletionResponse", raw.json())
        with anthropic_client(server) as claude:
            refused = claude.messages.create(**message_request("a", "x")["params"])
        assert refused.stop_reason == "refusal"
        assert refused.stop_details is not None and refused.stop_details.type == "refusal"


def test_refused_draws_depend_on_body_only(make_emulator: MakeEmulator) -> None:
    with make_emulator(fail={"refused": 0.5}, seed=7) as server, openai_client(server) as client:
        bodies = [chat_body(f"prompt {i}") for i in range(20)]
        first = [
            client.chat.completions.create(**body).choices[0].message.refusal is not None
            for body in bodies
        ]
        second = [
            client.chat.completions.create(**body).choices[0].message.refusal is not None
            for body in bodies
        ]
        assert first == second and any(first) and not all(first)


def test_transient_fault_clears_on_resend(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(fail={"server_error": 0.5}, control_fail=0.0, seed=3) as server,
        openai_client(server) as client,
    ):
        body = chat_body("retry me")
        outcomes = []
        for _ in range(30):
            try:
                client.chat.completions.create(**body)
                outcomes.append("ok")
            except openai.InternalServerError:
                outcomes.append("500")
        assert "ok" in outcomes and "500" in outcomes
    with (
        make_emulator(fail={"server_error": 0.5}, control_fail=0.0, seed=3) as server,
        openai_client(server) as client,
    ):
        again = []
        for _ in range(30):
            try:
                client.chat.completions.create(**body)
                again.append("ok")
            except openai.InternalServerError:
                again.append("500")
        assert again == outcomes  # same seed, same body, same attempts: same faults


def test_invalid_image_only_hits_image_requests(make_emulator: MakeEmulator) -> None:
    with make_emulator(fail={"invalid_image": 1.0}) as server, openai_client(server) as client:
        assert (
            client.chat.completions.create(**chat_body("plain")).choices[0].message.content
            == "echo: plain"
        )
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="gpt-4o", messages=[IMAGE_MESSAGE])  # type: ignore[list-item]
        assert raised.value.code == "invalid_image_url"
        line = {
            "custom_id": "img",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o", "messages": [IMAGE_MESSAGE]},
        }
        _, out, err = _run_batch(client, [line, chat_line("txt", "x", model="gpt-4o")])
        assert [o["custom_id"] for o in out] == ["txt"]
        assert err[0]["response"]["body"]["error"]["code"] == "invalid_image_url"  # type: ignore[index]


def test_invalid_output_breaks_the_schema_only_for_schema_requests(
    make_emulator: MakeEmulator,
) -> None:
    import jsonschema
    import orjson

    with make_emulator(fail={"invalid_output": 1.0}) as server, openai_client(server) as client:
        plain = client.chat.completions.create(**chat_body("x"))
        assert plain.choices[0].message.content == "echo: x"
        shaped = client.chat.completions.create(
            **chat_body("x", response_format=JSON_SCHEMA_FORMAT)
        )
        content = shaped.choices[0].message.content
        assert content is not None
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(orjson.loads(content), SCHEMA)
    with make_emulator() as server, openai_client(server) as client:
        good = client.chat.completions.create(**chat_body("x", response_format=JSON_SCHEMA_FORMAT))
        assert good.choices[0].message.content is not None
        jsonschema.validate(orjson.loads(good.choices[0].message.content), SCHEMA)


def test_expired_batch_has_partial_results(
    make_emulator: MakeEmulator, openai_schema: SchemaCheck
) -> None:
    with make_emulator(fail={"expired": 1.0}) as server, openai_client(server) as client:
        batch, out, err = _run_batch(client, [chat_line(f"r{i}", "x") for i in range(10)])
        assert batch.status == "expired" and batch.expired_at is not None
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (5, 5)
        assert len(out) == 5
        for line in err:
            openai_schema("BatchRequestOutput", line)
            assert line["response"] is None
            assert line["error"] == {"code": "batch_expired", "message": line["error"]["message"]}  # type: ignore[index]
        assert server.stats()["requests_billed"] == 5
        with anthropic_client(server) as claude:
            created = claude.messages.batches.create(
                requests=[message_request(f"r{i}", "x") for i in range(4)]
            )  # type: ignore[misc]
            ended = claude.messages.batches.retrieve(created.id)
            assert (ended.request_counts.succeeded, ended.request_counts.expired) == (2, 2)
            kinds = sorted(r.result.type for r in claude.messages.batches.results(created.id))
            assert kinds == ["expired", "expired", "succeeded", "succeeded"]


def test_anthropic_batch_errored_results(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(fail={"server_error": 1.0}, control_fail=0.0) as server,
        anthropic_client(server) as client,
    ):
        created = client.messages.batches.create(requests=[message_request("a", "x")])  # type: ignore[misc]
        (result,) = list(client.messages.batches.results(created.id))
        assert result.result.type == "errored"
        assert result.result.error.type == "error"
        assert result.result.error.error.type == "api_error"


def test_control_endpoints_fail_sometimes(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(control_fail=0.5, seed=1) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}) as http,
    ):
        statuses = [http.get("/v1/files").status_code for _ in range(20)]
        assert set(statuses) == {200, 500}
        failure = next(
            r for r in (http.get("/v1/batches") for _ in range(20)) if r.status_code == 500
        )
        assert failure.json()["error"]["type"] == "server_error"
        assert server.stats()["control_500"] == statuses.count(500) + 1


def test_lifecycle_with_faults_is_time_driven(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(batch_seconds=0.3, fail={"rate_limited": 0.5}) as server,
        openai_client(server) as client,
    ):
        file_id = client.files.create(
            file=("in.jsonl", jsonl([chat_line(f"r{i}", "x") for i in range(20)])), purpose="batch"
        ).id
        created = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        time.sleep(0.35)
        batch = client.batches.retrieve(created.id)
        assert batch.status == "completed" and batch.request_counts is not None
        assert 0 < batch.request_counts.failed < 20
        assert server.stats()["requests_billed"] == batch.request_counts.completed
