"""The Responses API and reasoning tokens on the emulator, through the official OpenAI SDK,
each reply checked against OpenAI's published schemas."""

import httpx
import openai
import pytest

from emulator.server import EmulatorServer
from emulator.testing import SchemaCheck, jsonl, parse_jsonl


def test_a_response_through_the_sdk_is_the_echo_with_its_usage(
    oai: openai.OpenAI, openai_schema: SchemaCheck, emulator: EmulatorServer
) -> None:
    made = oai.responses.create(model="gpt-4o-mini", input="hello", instructions="be brief")
    assert made.output_text == "echo: hello"
    assert made.status == "completed" and made.usage is not None
    # instructions: tokens("be brief")=2 +3; input: tokens("hello")=2 +3; priming 3
    assert made.usage.input_tokens == 13
    assert made.usage.output_tokens == 3  # tokens("echo: hello")
    assert made.usage.output_tokens_details.reasoning_tokens == 0
    raw = httpx.post(
        f"{emulator.url}/v1/responses",
        json={"model": "gpt-4o-mini", "input": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer k"},
    ).json()
    openai_schema("Response", raw)


def test_a_reasoning_model_bills_its_reasoning_as_output(oai: openai.OpenAI) -> None:
    """o4-mini at effort high: 8 reasoning tokens per answer token, in the output's count."""
    made = oai.responses.create(model="o4-mini", input="hello", reasoning={"effort": "high"})
    assert made.usage is not None and made.output_text == "echo: hello"
    assert made.usage.output_tokens_details.reasoning_tokens == 24
    assert made.usage.output_tokens == 3 + 24
    assert [item.type for item in made.output] == ["reasoning", "message"]
    chat = oai.chat.completions.create(
        model="o4-mini", messages=[{"role": "user", "content": "hello"}], reasoning_effort="low"
    )
    assert chat.usage is not None and chat.usage.completion_tokens_details is not None
    assert chat.usage.completion_tokens_details.reasoning_tokens == 6
    assert chat.usage.completion_tokens == 3 + 6


def test_reasoning_takes_the_token_limit_first(oai: openai.OpenAI) -> None:
    made = oai.responses.create(model="o4-mini", input="hello", max_output_tokens=10)
    assert made.status == "incomplete"
    assert made.incomplete_details is not None
    assert made.incomplete_details.reason == "max_output_tokens"
    assert made.usage is not None and made.usage.output_tokens == 10
    assert made.usage.output_tokens_details.reasoning_tokens == 10  # medium: 12 wanted
    assert made.output_text == ""


@pytest.mark.parametrize(
    ("create", "param"),
    [
        ({"model": "gpt-4o-mini", "input": "x", "reasoning": {"effort": "low"}}, "reasoning"),
        ({"model": "gpt-4o-mini", "input": "x", "max_tokens": 5}, "max_tokens"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]}, "messages"),
    ],
)
def test_what_the_responses_api_refuses_is_a_400_naming_the_parameter(
    emulator: EmulatorServer, create: dict[str, object], param: str
) -> None:
    got = httpx.post(
        f"{emulator.url}/v1/responses", json=create, headers={"Authorization": "Bearer k"}
    )
    assert got.status_code == 400
    error = got.json()["error"]
    assert error["param"] == param and error["code"] == "unsupported_parameter"


def test_a_reasoning_parameter_on_another_model_is_refused_by_chat(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="reasoning_effort"):
        oai.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "x"}],
            reasoning_effort="low",
        )


def test_a_responses_batch_through_the_sdk(oai: openai.OpenAI, openai_schema: SchemaCheck) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    fmt = {"format": {"type": "json_schema", "name": "item", "schema": schema, "strict": True}}
    lines = [
        {
            "custom_id": f"r{i}",
            "method": "POST",
            "url": "/v1/responses",
            "body": {"model": "o4-mini", "input": f"item {i}", "text": fmt},
        }
        for i in range(3)
    ]
    upload = oai.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    batch = oai.batches.create(
        input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
    )
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id is not None
    assert done.request_counts is not None and done.request_counts.completed == 3
    out = parse_jsonl(oai.files.content(done.output_file_id).content)
    assert sorted(line["custom_id"] for line in out) == ["r0", "r1", "r2"]
    for line in out:
        openai_schema("BatchRequestOutput", line)
        body = line["response"]["body"]
        openai_schema("Response", body)
        assert body["object"] == "response" and body["status"] == "completed"
        usage = body["usage"]
        reasoning = usage["output_tokens_details"]["reasoning_tokens"]
        assert reasoning == 4 * (usage["output_tokens"] - reasoning) > 0  # medium effort
        message = next(item for item in body["output"] if item["type"] == "message")
        assert message["content"][0]["type"] == "output_text"
        assert '"name"' in message["content"][0]["text"]
