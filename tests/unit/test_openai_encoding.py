from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maple_engine.providers.base import RequestSpec
from maple_engine.providers.openai.batch import OpenAIBatchProvider, _parse_line

UTF8 = st.characters(exclude_categories=("Cs",))  # lone surrogates are not UTF-8

PROVIDER = OpenAIBatchProvider(api_key="unused")


def bodies(
    spec: RequestSpec, texts: list[str | None], images: list[str] | None = None
) -> list[dict]:
    frame = pl.DataFrame({"t": texts, "i": images or [""] * len(texts)})
    image = pl.col("i") if images else None
    expr = PROVIDER.body_expr(spec, pl.col("t").fill_null(""), image)
    return [orjson.loads(b) for b in frame.select(expr.alias("b"))["b"]]


def test_chat_body_with_system_params_and_schema() -> None:
    schema = {"type": "object", "properties": {"brand": {"type": "string"}}}
    spec = RequestSpec("gpt-4o-mini", "Be brief.", {"temperature": 0, "max_tokens": 50}, schema)
    (body,) = bodies(spec, ['Brand of "Crème"\n?'])
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": 'Brand of "Crème"\n?'},
    ]
    assert body["temperature"] == 0 and body["max_tokens"] == 50
    assert body["response_format"]["json_schema"]["schema"] == schema


def test_image_part() -> None:
    (body,) = bodies(RequestSpec("m"), ["look"], ["https://x.test/a.png"])
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(UTF8, max_size=60), min_size=1, max_size=5))
def test_line_size_is_exact_and_lines_parse(texts: list[str]) -> None:
    frame = pl.DataFrame({"t": texts}).with_columns(
        pl.format("r{}", pl.int_range(pl.len())).alias("custom_id"),
        PROVIDER.body_expr(RequestSpec("m"), pl.col("t"), None).alias("request"),
    )
    sizes = frame.select(PROVIDER.line_bytes_expr(pl.col("custom_id"), pl.col("request")))
    encoded = PROVIDER.encode(frame.select("custom_id", "request"))
    assert int(sizes.to_series().sum()) == len(encoded)
    lines = [orjson.loads(line) for line in encoded.splitlines()]
    assert [line["body"]["messages"][-1]["content"] for line in lines] == texts
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}


def test_parse_both_error_shapes() -> None:
    http = _parse_line(
        {
            "custom_id": "r1",
            "error": None,
            "response": {
                "status_code": 429,
                "body": {"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
            },
        }
    )
    assert (http["status"], http["failure_class"], http["error"]) == (
        "failed",
        "rate_limited",
        "slow down",
    )
    unrun = _parse_line(
        {
            "custom_id": "r2",
            "response": None,
            "error": {"code": "batch_expired", "message": "expired"},
        }
    )
    assert (unrun["failure_class"], unrun["billed"]) == ("expired", False)
    refusal = _parse_line(
        {
            "custom_id": "r3",
            "error": None,
            "response": {
                "status_code": 200,
                "body": {
                    "choices": [
                        {"message": {"content": None, "refusal": "no"}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                },
            },
        }
    )
    assert (refusal["status"], refusal["failure_class"], refusal["billed"]) == (
        "failed",
        "refused",
        True,
    )


def test_vectorised_parse_equals_the_line_parser() -> None:
    from polars.testing import assert_frame_equal

    from maple_engine.providers.openai.lines import _slow, parse_result_file

    def ok(i: int, content: str | None, refusal: str | None = None, cached: int = 0) -> dict:
        return {
            "id": f"b{i}",
            "custom_id": f"r{i}",
            "error": None,
            "response": {
                "status_code": 200,
                "request_id": "q",
                "body": {
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": content,
                                "refusal": refusal,
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 10 + i,
                        "completion_tokens": i,
                        "prompt_tokens_details": {"cached_tokens": cached},
                    },
                },
            },
        }

    lines = [
        ok(1, "echo: a"),
        ok(2, 'échø "q"\n', cached=4),
        ok(3, None, refusal="I can't"),
        {
            "id": "b4",
            "custom_id": "r4",
            "error": None,
            "response": {
                "status_code": 500,
                "body": {"error": {"message": "boom", "type": "server_error", "code": None}},
            },
        },
        {
            "id": "b5",
            "custom_id": "r5",
            "response": None,
            "error": {"code": "batch_expired", "message": "expired"},
        },
    ]
    content = b"\n".join(orjson.dumps(line) for line in lines) + b"\n"
    fast = parse_result_file(content, "batch_1", _parse_line).sort("custom_id")
    slow = _slow(content, "batch_1", _parse_line).sort("custom_id")
    assert_frame_equal(fast, slow)
    assert fast["status"].to_list() == ["succeeded", "succeeded", "failed", "failed", "failed"]
    assert fast["failure_class"].to_list() == [None, None, "refused", "server_error", "expired"]


def test_a_line_the_typed_decoder_refuses_is_parsed_alone() -> None:
    from maple_engine.providers.openai.lines import parse_result_file
    from maple_engine.providers.vectors import vector_base64

    def embedding(i: int, vector: object) -> dict:
        body = {"object": "list", "data": [{"embedding": vector}], "usage": {"prompt_tokens": 3}}
        return {"custom_id": f"r{i}", "response": {"status_code": 200, "body": body}}

    lines = [embedding(0, "AAAAPw=="), embedding(1, [0.5, 0.25]), embedding(2, "AACAPg==")]
    content = b"\n\n".join(orjson.dumps(line) for line in lines)  # a blank line between
    rows = parse_result_file(content, "b", _parse_line).sort("custom_id")
    assert rows["response"].to_list() == ["AAAAPw==", vector_base64([0.5, 0.25]), "AACAPg=="]
    assert rows["status"].to_list() == ["succeeded"] * 3
    assert rows["input_tokens"].to_list() == [3, 3, 3]


def _chat_line(i: int, status: int = 200) -> bytes:
    body = {
        "choices": [{"message": {"content": f"answer {i}"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": i},
    }
    if status != 200:
        body = {"error": {"message": "boom", "type": "server_error", "code": None}}
    line = {"custom_id": f"r{i}", "response": {"status_code": status, "body": body}}
    return orjson.dumps(line)


def test_a_file_of_many_blocks_parses_as_the_line_parser_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks end where lines do, whatever their size; a block with a blank line or a failed
    line gives the same rows as the line parser (successes first, each in file order), from
    a downloaded file as from bytes, its last line with or without a newline."""
    from polars.testing import assert_frame_equal

    from maple_engine.providers.openai import lines

    monkeypatch.setattr(lines, "_BLOCK_BYTES", 300)  # two or three lines a block
    raw = [_chat_line(i, 500 if i in (4, 11) else 200) for i in range(20)]
    raw[7] += b"\n"  # a blank line
    for content in (b"\n".join(raw), b"\n".join(raw) + b"\n"):
        path = tmp_path / "out.jsonl"
        path.write_bytes(content)
        rows = lines.parse_result_file(str(path), "b", _parse_line)
        assert_frame_equal(rows, lines.parse_result_file(content, "b", _parse_line))
        assert_frame_equal(
            rows.sort("custom_id"), lines._slow(content, "b", _parse_line).sort("custom_id")
        )
        order = [f"r{i}" for i in range(20) if i not in (4, 11)] + ["r4", "r11"]
        assert rows["custom_id"].to_list() == order
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert lines.parse_result_file(str(tmp_path / "empty.jsonl"), "b", _parse_line).is_empty()


def test_a_line_holding_two_values_is_refused_as_the_line_parser_refuses_it() -> None:
    from maple_engine.providers.openai.lines import parse_result_file

    content = b"\n".join([_chat_line(0), _chat_line(1) + _chat_line(2), _chat_line(3)])
    with pytest.raises(orjson.JSONDecodeError):
        parse_result_file(content, "b", _parse_line)
