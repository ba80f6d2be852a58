"""`--provider openai-flex` against the emulator over HTTP: flex requests at batch prices,
through the flex tier's 429 "resource unavailable", nothing billed twice; and a deadline that
tries flex before standard real-time while the time left allows."""

import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import TokenUsage, cost_usd
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.send.deadline_lanes import DeadlineLanes, deadline_lanes, late_lane
from maple_engine.send.lane import RealtimeLane
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

ROWS = 150


@pytest.mark.parametrize(
    ("provider", "model", "family"),
    [
        ("openai-flex", "gpt-4.1-mini", "OPENAI"),
        # ~15-24 s: Gemini's flex 429s are retried after a longer wait
        pytest.param("gemini-flex", "gemini-2.5-flash", "GEMINI", marks=pytest.mark.slow),
    ],
)
def test_flex_finishes_at_batch_prices_through_flex_429s(
    provider: str, model: str, family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": [f"Maple Farm oats {i}" for i in range(ROWS)]}).write_parquet(source)
    config = EmulatorConfig(batch_seconds=0.1, flex_unavailable=0.3, flex_delay_s=0.01, seed=7)
    with EmulatorServer(config) as server:
        suffix = "/v1" if family == "OPENAI" else ""
        monkeypatch.setenv(f"{family}_BASE_URL", f"{server.url}{suffix}")
        monkeypatch.setenv(f"{family}_API_KEY", "test-key")
        args = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", model]
        args += ["--provider", provider, "--job", "flex", "--storage", str(tmp_path / "s")]
        args += ["--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.1", "--quiet"]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        stats = server.stats()
    rows = pl.read_parquet(tmp_path / "out.parquet")
    assert (rows["llm_status"] == "succeeded").all()
    assert rows["llm_batch_id"].str.starts_with("rt-flex-").all()
    assert stats["flex_429"] > 15  # the tier pushed back, and every row got through anyway
    assert stats["flex_requests"] == ROWS + stats["flex_429"]
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0

    price = PriceBook().price(model, provider)
    tokens = rows.select("llm_input_tokens", "llm_cached_tokens", "llm_cache_write_tokens")
    sheet = sum(
        cost_usd(price, TokenUsage(i, c, w, o), batch=True)
        for (i, c, w), o in zip(tokens.iter_rows(), rows["llm_output_tokens"], strict=True)
    )
    assert abs(rows["llm_cost_usd"].sum() - sheet) < 1e-6
    with CostLedger(storage_root=str(tmp_path / "s")) as ledger:
        [report] = ledger.report(by="job")
    assert abs(report["cost_usd"] - sheet) < 1e-6
    assert report["savings_usd"] == pytest.approx(sheet, rel=1e-6)  # half of real-time


def late(lanes: DeadlineLanes) -> RealtimeLane:
    """The late lane for the time left before the lanes' deadline now."""
    at = lanes.deadline_at()
    assert at is not None
    return late_lane(lanes, at - time.time())


def test_a_deadline_sends_late_rows_by_flex_while_time_allows(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    batch = OpenAIBatchProvider(api_key="k", base_url="http://127.0.0.1:1/v1")
    provider = deadline_lanes(batch, storage, "job", 6 * 3600, CHAT)
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 5.6 * 3600})
    assert provider.deadline_due()
    assert late(provider).wire.provider_name == "openai-flex"  # 24 minutes left
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 5.9 * 3600})
    assert late(provider).wire.provider_name == "openai-realtime"  # 6 minutes left
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 3 * 3600})
    assert not provider.deadline_due()


def test_the_last_lane_is_the_priority_tier(tmp_path: Path) -> None:
    """batch -> flex -> standard real time -> priority: the priority tier takes over for the
    last tenth of the deadline's margin (30 minutes here) and past the deadline; it has no
    embeddings."""
    storage = Storage(str(tmp_path))
    batch = OpenAIBatchProvider(api_key="k", base_url="http://127.0.0.1:1/v1")
    provider = deadline_lanes(batch, storage, "job", 6 * 3600, CHAT)
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 5.9 * 3600})
    assert late(provider).wire.provider_name == "openai-realtime"  # 6 minutes left
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 5.97 * 3600})
    assert late(provider).wire.provider_name == "openai-priority"  # 1.8 minutes left
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 7 * 3600})
    assert late(provider).wire.provider_name == "openai-priority"  # past the deadline
    embeds = deadline_lanes(batch, storage, "job", 6 * 3600, EMBEDDING)
    assert late(embeds).wire.provider_name == "openai-realtime"


def test_an_embedding_job_is_never_sent_to_flex(tmp_path: Path) -> None:
    """The flex tier serves chat models only: ``maple embed`` refuses it before anything is
    sent, and an embedding job's deadline goes straight to standard real time (before, its
    rows went to flex, were billed, and every rerun failed them with "invalid base64")."""
    storage = Storage(str(tmp_path))
    batch = OpenAIBatchProvider(api_key="k", base_url="http://127.0.0.1:1/v1")
    provider = deadline_lanes(batch, storage, "job", 6 * 3600, EMBEDDING)
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - 5.6 * 3600})
    assert late(provider).wire.provider_name == "openai-realtime"  # 24 minutes: not flex
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": ["a", "b"]}).write_parquet(source)
    args = ["embed", str(source), "--text", "{title}", "--model", "text-embedding-3-small"]
    args += ["--provider", "openai-flex", "--storage", str(tmp_path / "store")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "Invalid value for '--provider': 'openai-flex' is not one of" in result.output
    assert not (tmp_path / "store").exists()
