"""The Responses API's request bodies and replies (maple_engine.providers.openai.wire)."""

from typing import Any

import orjson
import polars as pl

from maple_engine.providers.base import RequestSpec
from maple_engine.providers.openai import wire

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def body(**spec: Any) -> dict[str, Any]:
    request = RequestSpec(model="o4-mini", endpoint="responses", **spec)
    frame = pl.DataFrame({"t": ['say "hi"'], "u": ["https://x/1.png"]})
    encoded = frame.select(wire.body_expr(request, pl.col("t"), pl.col("u"))).item()
    assert wire.path_of_body(encoded) == wire.RESPONSES_PATH
    return dict(orjson.loads(encoded))


def test_a_responses_body_has_input_instructions_and_text_format() -> None:
    made = body(system="be brief", params={"text": {"verbosity": "low"}}, response_schema=SCHEMA)
    assert made["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": 'say "hi"'},
                {"type": "input_image", "image_url": "https://x/1.png"},
            ],
        }
    ]
    assert made["instructions"] == "be brief"
    assert made["text"]["verbosity"] == "low"  # the user's text options stay beside the format
    assert made["text"]["format"]["type"] == "json_schema"
    assert made["text"]["format"]["schema"] == SCHEMA and made["text"]["format"]["strict"]


def test_each_api_is_told_by_its_body() -> None:
    assert wire.path_of_body('{"input":"text","model":"m"}') == wire.EMBEDDINGS_PATH
    assert wire.path_of_body('{"input":[{"role":"user"}]}') == wire.RESPONSES_PATH
    assert wire.path_of_body('{"messages":[]}') == wire.CHAT_PATH


def reply(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 24},
    }
    return {"object": "response", "status": "completed", "output": output, "usage": usage} | extra


TEXT = {"type": "message", "content": [{"type": "output_text", "text": "ok"}]}


def test_a_reply_maps_to_the_chat_columns() -> None:
    row = wire.parse_reply("r1", reply([{"type": "reasoning", "summary": []}, TEXT]))
    assert row["status"] == "succeeded" and row["response"] == "ok"
    assert (row["input_tokens"], row["cached_input_tokens"]) == (10, 4)
    assert (row["output_tokens"], row["reasoning_tokens"]) == (30, 24)


def test_refusals_cut_replies_and_empty_incomplete_ones() -> None:
    refusal = {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}
    refused = wire.parse_reply("r", reply([refusal]))
    assert (refused["failure_class"], refused["error"]) == ("refused", "no")
    filtered = wire.parse_reply("r", reply([], incomplete_details={"reason": "content_filter"}))
    assert filtered["failure_class"] == "refused"
    cut = reply([TEXT], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    assert wire.parse_reply("r", cut)["status"] == "succeeded"  # as chat's "length"
    empty = reply([], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    row = wire.parse_reply("r", empty)
    assert row["failure_class"] == "invalid_output" and row["billed"] is True
    assert row["resendable"] is False and "24 of its 30" in row["error"]  # the same would spend
    assert wire.parse_reply("r", cut).get("resendable") is None


def test_a_chat_completion_reports_its_reasoning_and_an_embedding_none() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 9}
    chat = {"object": "chat.completion", "choices": [{"message": {"content": "x"}}]}
    assert wire.parse_reply("r", chat | {"usage": usage})["reasoning_tokens"] is None
    detailed = usage | {"completion_tokens_details": {"reasoning_tokens": 6}}
    assert wire.parse_reply("r", chat | {"usage": detailed})["reasoning_tokens"] == 6


def test_a_chat_batch_file_reports_reasoning_through_the_fast_reader() -> None:
    from maple_engine.providers.openai.batch import _parse_line
    from maple_engine.providers.openai.lines import parse_result_file

    def line(i: int, details: dict[str, Any] | None) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": 9}
        if details is not None:
            usage["completion_tokens_details"] = details
        chat = {"object": "chat.completion", "choices": [{"message": {"content": "x"}}]}
        response = {"status_code": 200, "body": chat | {"usage": usage}}
        return {"custom_id": f"r{i}", "response": response, "error": None}

    lines = [line(0, {"reasoning_tokens": 6}), line(1, None), line(2, {"audio_tokens": 0})]
    data = b"\n".join(orjson.dumps(x) for x in lines) + b"\n"
    rows = parse_result_file(data, "b", _parse_line)
    assert rows["reasoning_tokens"].to_list() == [6, None, None]
    assert rows["output_tokens"].to_list() == [9, 9, 9]
