"""Batch and file objects as an AI gateway re-shapes them (LiteLLM's proxy: ``null`` for every
absent optional field, ``request_counts: null`` until known, fields the API does not define):
the emulator's ``--gateway-nulls`` mode answers so, and a batch job runs to its end through it,
every row once, a kill -9 after the create adopted from the re-shaped listing."""

from pathlib import Path

import httpx
import orjson
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.hostile import maple_at, table_job

ROWS = 12


def test_the_emulator_answers_with_a_gateways_nulls_and_extra_fields() -> None:
    config = EmulatorConfig(batch_seconds=30, control_fail=0, gateway_nulls=True)
    auth = {"Authorization": "Bearer k"}
    with EmulatorServer(config) as server, httpx.Client(base_url=f"{server.url}/v1") as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        line = orjson.dumps(
            {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
        )
        files = {"file": ("in.jsonl", line, "application/jsonl")}
        upload = client.post("/files", headers=auth, files=files, data={"purpose": "batch"})
        created = client.post("/batches", headers=auth, json={
            "input_file_id": upload.json()["id"], "endpoint": "/v1/chat/completions",
            "completion_window": "24h"})  # fmt: skip
        listing = client.get("/batches", headers=auth).json()
    batch = created.json()
    assert upload.json()["status_details"] is None and "custom_llm_provider" in upload.json()
    assert batch["request_counts"] is None and batch["usage"] is None
    assert batch["output_file_id"] is None and batch["errors"] is None
    assert batch["custom_llm_provider"] == "openai" and "_hidden_params" in batch
    assert listing["data"][0]["request_counts"] is None


@pytest.mark.parametrize(
    "provider", [pytest.param("openai", marks=pytest.mark.slow), "openai-compatible"]
)
def test_a_batch_job_runs_to_the_end_through_gateway_shaped_objects(
    tmp_path: Path, provider: str
) -> None:
    config = EmulatorConfig(batch_seconds=0.3, control_fail=0, gateway_nulls=True)
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1",
                     "--max-requests-per-batch", "5")  # fmt: skip
    with EmulatorServer(config) as server:
        generic = {"MAPLE_BASE_URL": f"{server.url}/v1", "MAPLE_API_KEY": "k"}
        killed, _ = maple_at(server.url, *args, **generic, MAPLE_CRASH_AT="after_create")
        done, _ = maple_at(server.url, *args, **generic)
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert (out["llm_input_tokens"] > 0).all() and (out["llm_cost_usd"] > 0).all()
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3
