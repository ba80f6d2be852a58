"""Mistral's wire: a batch line is ``{"custom_id", "body"}`` (the job names the model and the
endpoint), a job's statuses map onto the engine's batch states, and result lines parse (a
failed line's body is a JSON string); the settings' variables and the host before ``/v1``."""

import base64
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest

from maple_assets.provider_settings import provider_settings
from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass
from maple_engine.model import EMBEDDING
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.providers.lost import LOST
from maple_engine.providers.mistral import wire
from maple_engine.providers.mistral.batch import MistralBatchProvider
from maple_engine.providers.registry import build_provider, capabilities
from maple_engine.settings import Settings

BODY = '{"messages":[{"role":"user","content":"hi"}],"model":"mistral-small-latest"}'


def provider(**settings: Any) -> MistralBatchProvider:
    built = build_provider("mistral", api_key="k", **settings)
    assert isinstance(built, MistralBatchProvider)
    return built


def test_a_line_is_custom_id_and_body_without_method_or_url() -> None:
    requests = pl.DataFrame({"custom_id": ["a", 'b"2'], "request": [BODY, BODY]})
    lines = [orjson.loads(line) for line in provider().encode(requests).splitlines()]
    assert lines == [
        {"custom_id": "a", "body": orjson.loads(BODY)},
        {"custom_id": 'b"2', "body": orjson.loads(BODY)},
    ]
    sized = requests.select(
        provider().line_bytes_expr(pl.col("custom_id"), pl.col("request"))
    ).to_series()
    assert sized.to_list() == [len(line) + 1 for line in provider().encode(requests).splitlines()]


def test_the_job_names_the_file_model_endpoint_metadata_and_timeout() -> None:
    requests = pl.DataFrame({"custom_id": ["a"], "request": [BODY]})
    payload = ShardPayload("j", "s00001", 2, "mistral-small-latest", requests)
    made = provider(completion_window="48h")._create_json(payload, "file-1", "h4sh")
    assert made == {
        "input_files": ["file-1"],
        "model": "mistral-small-latest",
        "endpoint": "/v1/chat/completions",
        "metadata": {
            "maple_job": "j",
            "maple_shard": "s00001",
            "maple_attempt": "2",
            "maple_hash": "h4sh",
        },
        "timeout_hours": 48,
    }


@pytest.mark.parametrize(
    ("status", "engine", "ended"),
    [("QUEUED", "validating", False), ("RUNNING", "in_progress", False),
     ("SUCCESS", "completed", True), ("FAILED", "failed", True),
     ("TIMEOUT_EXCEEDED", "expired", True), ("CANCELLATION_REQUESTED", "cancelling", False),
     ("CANCELLED", "cancelled", True), (LOST, LOST, True)],
)  # fmt: skip
def test_each_status_maps_onto_a_batch_state(status: str, engine: str, ended: bool) -> None:
    job = {
        "id": "b1",
        "status": status,
        "total_requests": 5,
        "completed_requests": 4,
        "succeeded_requests": 3,
        "failed_requests": 1,
        "errors": [{"message": "HTTP Error, status code: 400", "count": 1}],
        "created_at": 100,
        "started_at": 110,
    }
    state = wire.job_state(job)
    assert (state.status, state.ended) == (engine, ended)
    assert (state.total, state.completed, state.failed) == (5, 3, 1)
    assert state.errors == ("HTTP Error, status code: 400",)
    assert state.times == (("created", 100.0), ("in_progress", 110.0))


def test_a_success_line_parses_as_a_chat_completion() -> None:
    body = {
        "object": "chat.completion",
        "choices": [{"message": {"content": "salut"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }
    line = {"custom_id": "a", "response": {"status_code": 200, "body": body}, "error": None}
    row = wire.parse_line(line)
    assert (row["status"], row["response"], row["billed"]) == ("succeeded", "salut", True)
    assert (row["input_tokens"], row["output_tokens"]) == (7, 2)


def test_a_failed_line_reads_the_error_object_its_body_holds_as_a_string() -> None:
    error = {
        "object": "error",
        "message": "bad role",
        "type": "invalid_request_file",
        "code": "3310",
    }
    line = {
        "custom_id": "a",
        "response": {"status_code": 400, "body": orjson.dumps(error).decode()},
        "error": None,
    }
    row = wire.parse_line(line)
    assert (row["status"], row["failure_class"], row["error"]) == (
        "failed",
        FailureClass.INVALID_REQUEST.value,
        "bad role",
    )
    assert row["billed"] is False
    busy = {**line, "response": {"status_code": 503, "body": "upstream busy"}}
    assert wire.parse_line(busy)["failure_class"] == FailureClass.SERVER_ERROR.value


def test_a_line_with_only_an_error_is_a_failure_of_its_code() -> None:
    line = {"custom_id": "a", "response": None, "error": {"code": "batch_expired", "message": "x"}}
    assert wire.parse_line(line)["failure_class"] == FailureClass.EXPIRED.value


@pytest.mark.parametrize(
    "given",
    [None, "https://api.mistral.ai", "https://api.mistral.ai/", "https://api.mistral.ai/v1"],
)
def test_every_path_is_under_the_host_and_v1(given: str | None) -> None:
    assert wire.api_url(given) == "https://api.mistral.ai/v1"
    assert provider(base_url=given).resolved_base_url() == "https://api.mistral.ai/v1"


def test_the_key_is_a_bearer_token_and_a_missing_one_names_its_variable() -> None:
    assert provider().auth_headers() == {"Authorization": "Bearer k"}
    for name in ("mistral", "mistral-realtime"):
        with pytest.raises(ConfigError, match=r"^MISTRAL_API_KEY is not set"):
            build_provider(name, storage_root="/tmp/unused").check_credentials()


def test_settings_come_from_the_mistral_variables() -> None:
    settings = Settings(
        provider_api={"MISTRAL_API_KEY": "k", "MISTRAL_BASE_URL": "http://127.0.0.1:9"}
    )
    for name in ("mistral", "mistral-realtime"):
        assert provider_settings(name, settings) == {
            "api_key": "k",
            "base_url": "http://127.0.0.1:9",
        }


def test_capabilities_say_what_mistral_documents() -> None:
    caps = capabilities("mistral")
    assert (caps.limits.max_requests, caps.limits.max_bytes) == (100_000, 512_000_000)
    assert caps.price_families == ("mistral",) and caps.realtime_twin == "mistral-realtime"
    assert caps.completion_windows == ("24h", "48h", "72h", "168h")
    with pytest.raises(ConfigError, match="Mistral takes 24h"):
        provider(completion_window="1h").check_credentials()


def test_an_embedding_body_is_mistrals_and_its_job_goes_to_v1_embeddings() -> None:
    spec = RequestSpec(model="codestral-embed", kind=EMBEDDING, dimensions=256)
    frame = pl.DataFrame({"t": ['a "quoted" text', "é"]})
    encoded = frame.select(provider().body_expr(spec, pl.col("t"), None)).to_series().to_list()
    assert [orjson.loads(body) for body in encoded] == [
        {"input": text, "model": "codestral-embed", "encoding_format": "float",
         "output_dimension": 256}
        for text in frame["t"]
    ]  # fmt: skip
    plain = RequestSpec(model="mistral-embed", kind=EMBEDDING)
    body = frame.head(1).select(wire.body_expr(plain, pl.col("t"), None)).item()
    assert orjson.loads(body) == {
        "input": 'a "quoted" text', "model": "mistral-embed", "encoding_format": "float"
    }  # fmt: skip
    requests = pl.DataFrame({"custom_id": ["a"], "request": [encoded[0]]})
    payload = ShardPayload("j", "s00001", 1, "codestral-embed", requests)
    assert provider()._create_json(payload, "file-1", "h")["endpoint"] == "/v1/embeddings"


def test_an_embedding_line_parses_its_float_vector_and_tokens() -> None:
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -1.0, 2.0]}],
        "model": "codestral-embed",
        "usage": {"prompt_tokens": 4, "total_tokens": 4},
    }
    line = {"custom_id": "a", "response": {"status_code": 200, "body": body}, "error": None}
    row = wire.parse_line(line)
    assert (row["status"], row["billed"], row["input_tokens"]) == ("succeeded", True, 4)
    vector = np.frombuffer(base64.b64decode(row["response"]), dtype="<f4")
    assert vector.tolist() == [0.5, -1.0, 2.0]


def test_mistral_embed_takes_no_dimensions_and_codestral_embed_at_most_3072() -> None:
    for name in ("mistral", "mistral-realtime"):
        caps = capabilities(name)
        assert EMBEDDING in caps.kinds
        fixed, shortens = caps.model_family("mistral-embed"), caps.model_family("codestral-embed")
        assert fixed is not None and not fixed.shortens
        assert shortens is not None and shortens.max_dimensions == 3072
