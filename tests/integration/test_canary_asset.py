"""``enrichment(canary=...)`` through Dagster's machinery against the emulator over HTTP: the
``input_shards`` run shows the canary's figures, and a failing canary fails that run (with the
figures on the failure) before any submission exists; a provider with no real-time API sends
its canary as one small batch."""

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import dagster as dg
import polars as pl
import pytest

import maple_assets
from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from maple_engine.canary import last_canary, run_canary
from maple_engine.errors import CanaryFailed
from maple_engine.job import Job
from maple_engine.plan.rerun import shard_input
from maple_engine.providers.base import ProviderCapabilities
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.spec import build_spec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage

SCHEMA = {
    "type": "object",
    "properties": {"brand": {"type": "string"}},
    "required": ["brand"],
    "additionalProperties": False,
}


def shards_run(tmp_path: Path, config: EmulatorConfig, monkeypatch: Any, **options: Any) -> Any:
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": [f"Maple Farm oats {i}" for i in range(30)]}).write_parquet(source)
    with EmulatorServer(config) as server:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
        en = enrichment(
            name="canaried",
            source=str(source),
            prompt="Brand of {title}",
            model="gpt-4o-mini",
            provider="emulator",
            **options,
        )
        resources = maple_resources([en], storage_root=str(tmp_path / "store"))
        with dg.instance_for_test() as instance:
            result = dg.materialize(
                [*en.assets, *en.checks],
                selection=[en.key("input_shards")],
                instance=instance,
                resources=resources,
                raise_on_error=False,
            )
        return result, server.stats()


def test_the_input_shards_run_shows_the_canary(tmp_path: Path, monkeypatch: Any) -> None:
    result, stats = shards_run(
        tmp_path, EmulatorConfig(batch_seconds=0), monkeypatch, canary=6, response_schema=SCHEMA
    )
    assert result.success
    [materialization] = result.asset_materializations_for_node("canaried__input_shards")
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["canary_sample_size"] == 6 and meta["canary_success_share"] == 1.0
    assert meta["canary_schema_valid_share"] == 1.0 and meta["canary_top_failure"] == "none"
    assert meta["reused"] == 6 and meta["to_send"] == 24  # the canary's rows are not sent again
    assert stats["requests_billed"] == 6 and stats["batches_created"] == 0


def test_a_failing_canary_fails_the_run_before_submissions(
    tmp_path: Path, monkeypatch: Any
) -> None:
    config = EmulatorConfig(batch_seconds=0, fail={"invalid_output": 0.8}, seed=5)
    result, stats = shards_run(
        tmp_path, config, monkeypatch, canary=10, canary_min_success=0.95, response_schema=SCHEMA
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.step_failure_data.error
    assert "canary failed" in error.message and "invalid_output" in error.message
    meta = {k: v.value for k, v in failure.step_failure_data.user_failure_data.metadata.items()}
    assert meta["canary_sample_size"] == 10 and meta["canary_success_share"] < 0.95
    assert meta["canary_schema_valid_share"] < 0.95
    assert meta["canary_top_failure"] == "invalid_output"
    assert stats["batches_created"] == 0 and stats["files_uploaded"] == 0
    state = JobState(Storage(str(tmp_path / "store")), "canaried")
    assert state.manifest() is None  # no shard was planned, so no submission can start


class NoRealtimeBatches(OpenAIBatchProvider):
    """OpenAI's Batch API as a provider with no real-time twin (as Bedrock is here)."""

    capabilities: ClassVar[ProviderCapabilities] = dataclasses.replace(
        OpenAIBatchProvider.capabilities, realtime_twin=None, flex_twin=None
    )


def test_with_no_real_time_api_the_canary_is_one_small_batch(
    tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": [f"Maple Farm oats {i}" for i in range(30)]}).write_parquet(source)
    spec = build_spec(
        name="small", source=str(source), prompt="Brand of {title}", model="gpt-4o-mini", canary=5
    )
    provider = NoRealtimeBatches(api_key="k", base_url=f"{emulator_server.url}/v1")
    job = Job(
        spec=spec, state=JobState(Storage(str(tmp_path / "store")), "small"), provider=provider
    )
    _, _, counts = shard_input(job, str(source), before_planning=run_canary)
    stats = emulator_server.stats()
    assert stats["batches_created"] == 1 and stats["requests_billed"] == 5
    assert (counts.sent, counts.reused) == (25, 5)
    report = last_canary(job.state)
    assert report is not None and report.passed and report.sent_via == provider.provider_name


def test_the_python_api_raises_canary_failed(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("MAPLE_EMULATOR_URL", raising=False)  # maple starts its own emulator
    source = tmp_path / "in.csv"
    pl.DataFrame({"title": [f"Maple Farm oats {i}" for i in range(12)]}).write_csv(source)
    with pytest.raises(CanaryFailed, match=r"canary failed: 0 of 4 rows .* top failure refused"):
        maple_assets.enrich(
            str(source),
            prompt="Brand of {title}",
            model="gpt-4o-mini",
            provider="emulator",
            storage=str(tmp_path / "store"),
            canary=4,
            emulator_fail=("refused=1.0",),
        )
    assert not (tmp_path / "in_enriched.csv").exists()
