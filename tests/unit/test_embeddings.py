"""The pure pieces of embedding jobs: request bodies, grouping several texts per real-time
request, parsing replies into result rows, decoding vectors into ``llm_embedding``, and the
near-duplicate pairs of the sample code location."""

import base64

import numpy as np
import orjson
import polars as pl
import pytest

from maple_assets.near_duplicates import near_duplicate_pairs
from maple_engine.errors import ConfigError
from maple_engine.merge.merge import merge_shard
from maple_engine.merge.output import shard_slices
from maple_engine.model import EMBEDDING, ROW_ID
from maple_engine.providers.base import RequestSpec
from maple_engine.providers.openai import wire


def b64(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def test_an_embedding_body_is_one_input_with_model_and_dimensions() -> None:
    spec = RequestSpec(model="m", kind=EMBEDDING, dimensions=8)
    frame = pl.DataFrame({"t": ['say "hi"', "é"]})
    bodies = frame.select(wire.body_expr(spec, pl.col("t"), None)).to_series().to_list()
    parsed = [orjson.loads(b) for b in bodies]
    assert parsed[0] == {
        "input": 'say "hi"',
        "model": "m",
        "encoding_format": "base64",
        "dimensions": 8,
    }
    assert parsed[1]["input"] == "é"
    requests = pl.DataFrame({"custom_id": ["r0"], "request": bodies[:1]})
    assert wire.path_of(requests) == wire.EMBEDDINGS_PATH


def test_rows_are_grouped_by_count_and_tokens() -> None:
    rows = [(f"r{i}", orjson.dumps({"input": f"t{i}", "model": "m"}).decode()) for i in range(5)]
    groups = wire.embedding_groups(rows, per_request=2)
    assert [ids for ids, _ in groups] == [("r0", "r1"), ("r2", "r3"), ("r4",)]
    assert orjson.loads(groups[0][1]) == {"input": ["t0", "t1"], "model": "m"}
    big = "x" * (4 * wire.MAX_TOKENS_PER_REQUEST - 10)
    heavy = [
        ("a", orjson.dumps({"input": big}).decode()),
        ("b", orjson.dumps({"input": "y" * 20}).decode()),
    ]
    assert [ids for ids, _ in wire.embedding_groups(heavy, per_request=100)] == [("a",), ("b",)]


def test_a_group_reply_is_one_row_per_input_by_index_tokens_adding_up() -> None:
    body = {
        "object": "list",
        "data": [
            {"index": 1, "embedding": [0.5, 0.5]},
            {"index": 0, "embedding": b64([1.0, 0.0])},
        ],
        "usage": {"prompt_tokens": 7},
    }
    rows = wire.parse_embedding_group(("r0", "r1"), body)
    assert [r["custom_id"] for r in rows] == ["r0", "r1"]
    assert rows[0]["response"] == b64([1.0, 0.0]) and rows[1]["response"] == b64([0.5, 0.5])
    assert [r["input_tokens"] for r in rows] == [4, 3]
    single = wire.parse_reply("r9", {**body, "data": body["data"][1:]})
    assert single["status"] == "succeeded" and single["output_tokens"] == 0


def responses(vectors: list[str | None]) -> pl.DataFrame:
    n = len(vectors)
    return pl.DataFrame(
        {
            ROW_ID: list(range(n)),
            "status": ["succeeded" if v else "failed" for v in vectors],
            "failure_class": [None if v else "empty_text" for v in vectors],
            "error": [None] * n,
            "response": vectors,
            "attempts": [1] * n,
            "input_tokens": [3] * n,
            "output_tokens": [0] * n,
            "cost_usd": [0.1] * n,
            "batch_id": ["b"] * n,
            "reused": [False] * n,
        },
        schema_overrides={"error": pl.String, "failure_class": pl.String},
    )


def test_vectors_become_a_fixed_size_float32_column() -> None:
    shard = pl.DataFrame({"sku": ["a", "b"], ROW_ID: [0, 1]})
    merged = merge_shard(shard, responses([b64([1.0, 2.0, 3.0]), None]), "m", None, vector=3)
    assert merged.columns[:2] == ["sku", "llm_embedding"]
    assert merged.schema["llm_embedding"] == pl.Array(pl.Float32, 3)
    assert merged["llm_embedding"].to_list() == [[1.0, 2.0, 3.0], None]
    assert "llm_response" not in merged.columns and "llm_output_tokens" not in merged.columns
    with pytest.raises(ConfigError, match="Row 1's embedding has 2 values"):
        merge_shard(shard, responses([b64([1.0, 2.0, 3.0]), b64([1.0, 2.0])]), "m", None, 3)


def test_a_shard_merged_slice_by_slice_equals_the_shard_merged_whole() -> None:
    n = 23
    shard = pl.DataFrame({"sku": [f"s{i}" for i in range(n)], ROW_ID: list(range(100, 100 + n))})
    vectors = [b64([float(i), 1.0]) if i % 7 else None for i in range(n)]
    answers = responses(vectors).with_columns(pl.col(ROW_ID) + 100).reverse()  # any order
    whole = merge_shard(shard, answers, "m", None, vector=2)
    parts = list(shard_slices(shard, answers, 5))
    assert [part.height for part, _ in parts] == [5, 5, 5, 5, 3]
    assert all(got.height == part.height for part, got in parts)  # each slice its own answers
    sliced = pl.concat([merge_shard(part, got, "m", None, vector=2) for part, got in parts])
    assert sliced.equals(whole)
    assert next(shard_slices(shard, answers, None))[0] is shard


def test_near_duplicate_pairs() -> None:
    vectors = [[1.0, 0.0], [0.0, 1.0], [0.99, 0.05], None, [0.0, 2.0]]
    table = pl.DataFrame(
        {"sku": list("abcde"), "llm_embedding": vectors},
        schema={"sku": pl.String, "llm_embedding": pl.Array(pl.Float32, 2)},
    )
    pairs = near_duplicate_pairs(table, key="sku", threshold=0.95)
    assert pairs.select("key_a", "key_b").rows() == [("b", "e"), ("a", "c")]
    assert near_duplicate_pairs(table.head(1), key="sku").height == 0
