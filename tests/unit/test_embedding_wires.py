"""Gemini's and Bedrock Titan's embedding wire formats: request bodies, replies into result rows,
several texts per ``batchEmbedContents`` request, and the bodies refused before any upload."""

import base64

import numpy as np
import orjson
import polars as pl
import pytest

from maple_engine.errors import ConfigError
from maple_engine.model import EMBEDDING
from maple_engine.providers.base import RequestSpec
from maple_engine.providers.bedrock import wire as bedrock
from maple_engine.providers.gemini import wire as gemini
from maple_engine.providers.gemini.realtime import GeminiRealtimeProvider


def bodies(expr: pl.Expr) -> list[dict[str, object]]:
    frame = pl.DataFrame({"t": ['say "hi"', "é"]})
    return [orjson.loads(b) for b in frame.select(expr).to_series().to_list()]


def vector(b64: str) -> list[float]:
    return np.frombuffer(base64.b64decode(b64), dtype="<f4").tolist()


def test_a_gemini_embedding_body_is_an_embed_content_request() -> None:
    spec = RequestSpec(
        model="gemini-embedding-001",
        kind=EMBEDDING,
        dimensions=8,
        params={"task_type": "SEMANTIC_SIMILARITY"},
    )
    parsed = bodies(gemini.gemini_body_expr(spec, pl.col("t"), None))
    assert parsed[0] == {
        "content": {"parts": [{"text": 'say "hi"'}]},
        "taskType": "SEMANTIC_SIMILARITY",
        "outputDimensionality": 8,
    }
    plain = RequestSpec(model="m", kind=EMBEDDING)
    assert bodies(gemini.gemini_body_expr(plain, pl.col("t"), None))[1] == {
        "content": {"parts": [{"text": "é"}]}
    }


def test_gemini_replies_become_rows_batch_lines_and_batch_embed_contents() -> None:
    line = {
        "key": "r1",
        "response": {"embedding": {"values": [0.6, 0.8]}, "usageMetadata": {"promptTokenCount": 3}},
    }
    row = gemini.parse_result_line(line)
    assert (row["custom_id"], row["status"], row["input_tokens"]) == ("r1", "succeeded", 3)
    assert vector(row["response"]) == pytest.approx([0.6, 0.8])
    failed = gemini.parse_result_line({"key": "r2", "error": {"code": 8, "message": "slow"}})
    assert (failed["status"], failed["failure_class"]) == ("failed", "rate_limited")
    reply = {
        "embeddings": [{"values": [1.0, 0.0]}, {"values": [0.0, 1.0]}],
        "usageMetadata": {"promptTokenCount": 5},
    }
    rows = gemini.parse_embeddings(("a", "b"), reply)
    assert [r["input_tokens"] for r in rows] == [3, 2]  # adds up to what was billed
    assert vector(rows[1]["response"]) == [0.0, 1.0]
    with pytest.raises(KeyError):
        gemini.parse_embeddings(("a", "b", "c"), reply)  # a short reply is retried, not misread


def test_gemini_real_time_sends_up_to_its_limit_of_texts_per_request() -> None:
    provider = GeminiRealtimeProvider(api_key="k", model="gemini-embedding-001")
    spec = RequestSpec(model="gemini-embedding-001", kind=EMBEDDING, dimensions=4)
    frame = pl.DataFrame({"t": [f"text {i}" for i in range(250)]})
    encoded = frame.select(gemini.gemini_body_expr(spec, pl.col("t"), None)).to_series()
    rows = [(f"r{i}", body) for i, body in enumerate(encoded.to_list())]
    path, groups = provider.requests_of(rows)
    assert path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert [len(ids) for ids, _ in groups] == [100, 100, 50]
    first = orjson.loads(groups[0][1])["requests"][0]
    assert first == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "text 0"}]},
        "outputDimensionality": 4,
    }
    chat = [("c0", '{"contents":[]}')]
    assert provider.requests_of(chat)[1] == [(("c0",), '{"contents":[]}')]


def test_a_titan_body_and_its_output_line() -> None:
    spec = RequestSpec(model=bedrock.TITAN_EMBED_V2, kind=EMBEDDING, dimensions=256)
    parsed = bodies(bedrock.body_expr(spec, pl.col("t"), None))
    assert parsed[0] == {"inputText": 'say "hi"', "dimensions": 256, "normalize": True}
    default = RequestSpec(model=bedrock.TITAN_EMBED_V2, kind=EMBEDDING)
    assert bodies(bedrock.body_expr(default, pl.col("t"), None))[0]["dimensions"] == 1024
    line = {
        "recordId": "r0",
        "modelInput": parsed[0],
        "modelOutput": {"embedding": [0.6, 0.8], "inputTextTokenCount": 4},
    }
    row = bedrock.parse_output_line(line)
    assert (row["custom_id"], row["status"], row["input_tokens"]) == ("r0", "succeeded", 4)
    assert vector(row["response"]) == pytest.approx([0.6, 0.8])
    error = {"recordId": "r1", "error": {"errorCode": 429, "errorMessage": "Too many requests"}}
    assert bedrock.parse_output_line(error)["failure_class"] == "rate_limited"


@pytest.mark.parametrize(
    ("model", "dimensions", "message"),
    [
        ("amazon.titan-embed-text-v1", None, "Titan Text Embeddings V2"),
        ("cohere.embed-english-v3", 256, "--model amazon.titan-embed-text-v2:0"),
        (bedrock.TITAN_EMBED_V2, 300, "256, 512 or 1024 dimensions, not 300"),
    ],
)
def test_titan_refuses_other_models_and_dimensions(
    model: str, dimensions: int | None, message: str
) -> None:
    spec = RequestSpec(model=model, kind=EMBEDDING, dimensions=dimensions)
    with pytest.raises(ConfigError, match=message):
        bedrock.body_expr(spec, pl.col("t"), None)
