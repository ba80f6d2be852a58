"""The Anthropic Message Batches provider against the emulator over real HTTP, and through
``maple enrich --provider anthropic``: same output table as the OpenAI batch path."""

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from tests.conftest import env_provider

ROWS = 40


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as running:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield running


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.parquet"
    pl.DataFrame(
        {
            "sku": [f"S-{i}" for i in range(ROWS)],
            "title": [f"Maple Farm item {i} «{i % 7}»" for i in range(ROWS)],
        }
    ).write_parquet(path)
    return path


def enrich(
    source: Path,
    out: Path,
    store: Path,
    provider: str,
    model: str,
    *extra: str,
    failed: bool = False,
) -> None:
    args = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", model]
    args += ["--provider", provider, "--storage", str(store), "--output", str(out)]
    args += ["--poll-interval", "0.1", "--quiet", *extra]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == (3 if failed else 0), result.output  # 3: some rows failed


@pytest.mark.slow  # ~9 s; the default suite runs every name to its end (tests/conformance)
def test_enrich_output_matches_the_openai_batch_path(
    server: EmulatorServer, catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
    enrich(catalog, tmp_path / "a.parquet", tmp_path / "sa", "anthropic", "claude-haiku-4-5")
    enrich(catalog, tmp_path / "o.parquet", tmp_path / "so", "emulator", "gpt-4o-mini")
    ours, theirs = pl.read_parquet(tmp_path / "a.parquet"), pl.read_parquet(tmp_path / "o.parquet")
    assert ours.schema == theirs.schema
    assert ours.select("sku", "llm_response").equals(theirs.select("sku", "llm_response"))
    assert ours["llm_status"].unique().to_list() == ["succeeded"]
    assert ours["llm_batch_id"].str.starts_with("msgbatch_").all()
    assert (ours["llm_cost_usd"] > 0).all()
    assert server.stats()["bodies_billed_twice"] == 0


def test_errors_refusals_and_expiry_map_to_failure_classes(
    catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = {"server_error": 0.15, "refused": 0.2, "rate_limited": 0.15, "expired": 0.3}
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1, fail=faults, seed=3)) as running:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        enrich(
            catalog,
            tmp_path / "f.parquet",
            tmp_path / "s",
            "anthropic",
            "claude-haiku-4-5",
            failed=True,
        )
        stats = running.stats()
    out = pl.read_parquet(tmp_path / "f.parquet")
    assert out.height == ROWS and out["sku"].to_list() == [f"S-{i}" for i in range(ROWS)]
    failed = out.filter(pl.col("llm_status") == "failed")
    refused = failed.filter(pl.col("llm_failure_class") == "refused")
    assert set(failed["llm_failure_class"].to_list()) <= {"refused", "server_error"}
    assert refused.height > 0 and (refused["llm_attempts"] >= 2).all()  # 1 refusal retry
    assert (
        out.filter(pl.col("llm_status") == "succeeded")["llm_response"]
        .str.starts_with("echo: ")
        .all()
    )
    assert stats["fault_rate_limited"] > 0 and stats["fault_server_error"] > 0
    assert stats["bodies_billed_twice"] <= refused.height  # only refusals are paid again


def payload(provider: AnthropicBatchProvider, rows: int, shard: str = "s00000") -> ShardPayload:
    spec = RequestSpec("claude-haiku-4-5", system="Be brief.", params={"max_tokens": 64})
    frame = pl.DataFrame({"t": [f"text {i}" for i in range(rows)]})
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("job", shard, 1, spec.model, requests)


def test_orphan_created_before_a_crash_is_found_again(
    server: EmulatorServer, tmp_path: Path
) -> None:
    provider = env_provider("anthropic", intent_root=str(tmp_path))
    first = provider.submit(payload(provider, 5, "s00000"))
    second = provider.submit(payload(provider, 7, "s00001"))
    # A crash after the create answered but before its id reached the intent file:
    storage = Storage(str(tmp_path))
    key = "job/state/anthropic-intents/s00001-1.json"
    intent = storage.read_json(key)
    storage.write_json(key, {k: v for k, v in intent.items() if k != "batch_id"})
    found = {s.shard: s for s in provider.find_orphans("job")}
    assert found["s00000"].batch_id == first.batch_id
    assert found["s00001"].batch_id == second.batch_id
    assert found["s00001"].content_hash == second.content_hash and found["s00001"].adopted


def test_an_intent_whose_create_never_arrived_adopts_nothing(
    server: EmulatorServer, tmp_path: Path
) -> None:
    provider = env_provider("anthropic", intent_root=str(tmp_path))
    provider.submit(payload(provider, 5, "s00000"))
    Storage(str(tmp_path)).write_json(
        "job/state/anthropic-intents/s00001-1.json",
        {"shard": "s00001", "attempt": 1, "hash": "h", "count": 9, "at": 1.0e9},
    )
    assert {s.shard for s in provider.find_orphans("job")} == {"s00000"}


def test_results_carry_usage_and_poll_lists_many_batches(
    server: EmulatorServer, tmp_path: Path
) -> None:
    provider = env_provider("anthropic", intent_root=str(tmp_path))
    subs = [provider.submit(payload(provider, 3, f"s{i:05d}")) for i in range(5)]
    states = provider.poll(subs)
    while not all(s.ended for s in states.values()):
        states = provider.poll(subs)
    rows = provider.results(subs[0], states[subs[0].batch_id])
    assert rows["custom_id"].sort().to_list() == ["r0", "r1", "r2"]
    assert (rows["input_tokens"] > 0).all() and (rows["output_tokens"] > 0).all()
    assert states[subs[0].batch_id].completed == 3


def test_cancel_with_storage_flag_finds_the_jobs_intents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maple cancel --storage X`` builds the provider on X: the batch it created but never
    recorded (known only from its intent under X) is found and cancelled."""
    store = tmp_path / "elsewhere"
    monkeypatch.delenv("MAPLE_STORAGE", raising=False)
    monkeypatch.chdir(tmp_path)  # ./.maple is not the job's root
    with EmulatorServer(EmulatorConfig(batch_seconds=60)) as slow:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", slow.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        provider = env_provider("anthropic", intent_root=str(store))
        orphan = provider.submit(payload(provider, 3))
        JobState(Storage(str(store)), "job").write_spec({"spec": {"provider": "anthropic"}})
        result = CliRunner().invoke(main, ["cancel", "job", "--storage", str(store)])
    assert result.exit_code == 0, result.output
    assert "cancelled 1 batch(es)" in result.output
    assert orphan.batch_id in result.output
