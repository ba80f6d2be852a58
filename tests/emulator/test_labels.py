"""``--label-rule keywords`` and ``--label-noise`` over real HTTP, embeddings whose texts that
share words lie close, and the billed counters per kind."""

import httpx
import numpy as np
import orjson

from emulator.testing import MakeEmulator, chat_body, chat_line, jsonl

HEADERS = {"Authorization": "Bearer k"}
AISLES = ["other", "dairy", "produce", "bakery"]


def _schema_format(properties: dict[str, object]) -> dict[str, object]:
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return {
        "type": "json_schema",
        "json_schema": {"name": "label", "strict": True, "schema": schema},
    }


AISLE = _schema_format({"aisle": {"type": "string", "enum": AISLES}})
ORGANIC = _schema_format({"is_organic": {"type": "boolean"}})


def _answer(http: httpx.Client, text: str, response_format: dict[str, object]) -> object:
    reply = http.post("/v1/chat/completions", json=chat_body(text, response_format=response_format))
    assert reply.status_code == 200, reply.text
    return orjson.loads(reply.json()["choices"][0]["message"]["content"])


def test_keywords_answer_by_the_prompts_words(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(label_rule="keywords") as server,
        httpx.Client(base_url=server.url, headers=HEADERS) as http,
    ):
        assert _answer(http, "Fresh PRODUCE, and some bakery rolls", AISLE) == {"aisle": "produce"}
        assert _answer(http, "whole milk, dairy aisle", AISLE) == {"aisle": "dairy"}
        assert _answer(http, "a spanner", AISLE) == {"aisle": "other"}
        assert _answer(http, "organic oat milk", ORGANIC) == {"is_organic": True}
        assert _answer(http, "oat milk", ORGANIC) == {"is_organic": False}
        stats = server.stats()
        assert stats["chat_requests_billed"] == 5
        assert stats["embedding_inputs_billed"] == 0


def test_first_rule_is_todays_answer(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator() as server,
        httpx.Client(base_url=server.url, headers=HEADERS) as http,
    ):
        assert _answer(http, "whole milk, dairy aisle", AISLE) == {"aisle": "other"}
        assert _answer(http, "oat milk", ORGANIC) == {"is_organic": True}


def test_noise_flips_its_share_the_same_way_every_time(make_emulator: MakeEmulator) -> None:
    texts = [f"item {i} from the dairy case" for i in range(400)]
    with (
        make_emulator(label_rule="keywords", label_noise=0.25) as server,
        httpx.Client(base_url=server.url, headers=HEADERS) as http,
    ):
        first = [_answer(http, text, AISLE) for text in texts]
        again = [_answer(http, text, AISLE) for text in texts[:50]]
    flipped = sum(answer == {"aisle": "produce"} for answer in first)
    assert 0.18 < flipped / len(texts) < 0.32
    assert {"aisle": "dairy"} in first and again == first[:50]


def test_embeddings_of_texts_sharing_words_lie_close(make_emulator: MakeEmulator) -> None:
    texts = ["organic red apples from the farm", "organic green apples from a farm", "frozen pizza"]
    with (
        make_emulator() as server,
        httpx.Client(base_url=server.url, headers=HEADERS) as http,
    ):
        body = {"model": "text-embedding-3-small", "input": texts, "dimensions": 256}
        data = http.post("/v1/embeddings", json=body).json()["data"]
        vectors = np.array([item["embedding"] for item in data])
        stats = server.stats()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > abs(vectors[0] @ vectors[2])
    assert stats["embedding_inputs_billed"] == 3
    assert stats["chat_requests_billed"] == 0
    assert stats["requests_billed"] == 3


def test_a_batch_bills_its_lines_by_kind(make_emulator: MakeEmulator) -> None:
    lines = [chat_line(f"c{i}", f"dairy {i}", response_format=AISLE) for i in range(3)]
    embeds = [
        {"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings",
         "body": {"model": "text-embedding-3-small", "input": [f"a {i}", f"b {i}"]}}
        for i in range(2)
    ]  # fmt: skip
    with (
        make_emulator(label_rule="keywords") as server,
        httpx.Client(base_url=server.url, headers=HEADERS) as http,
    ):
        for endpoint, content in (("/v1/chat/completions", lines), ("/v1/embeddings", embeds)):
            upload = http.post(
                "/v1/files",
                files={"file": ("in.jsonl", jsonl(content))},
                data={"purpose": "batch"},
            ).json()
            body = {"input_file_id": upload["id"], "endpoint": endpoint, "completion_window": "24h"}
            batch = http.post("/v1/batches", json=body).json()
            assert http.get(f"/v1/batches/{batch['id']}").json()["status"] == "completed"
        stats = server.stats()
    assert stats["chat_requests_billed"] == 3
    assert stats["embedding_inputs_billed"] == 4
    assert stats["requests_billed"] == 7
