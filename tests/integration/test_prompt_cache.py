"""Prompt caching end to end: `maple enrich` against the emulator over HTTP, with a long shared
system prompt, `--cache auto` against `--cache off`; the output's cache columns, the ledger and
the price sheet agree to the micro-dollar."""

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import TokenUsage, cost_usd

ROWS = 1000
SYSTEM = "You extract the brand of a grocery product. Rules: " + " ".join(
    f"rule {i}: prefer the manufacturer's name over the retailer's label." for i in range(200)
)  # ~3,400 tokens


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as running:
        for name in ("ANTHROPIC", "OPENAI", "GEMINI"):
            monkeypatch.setenv(
                f"{name}_BASE_URL", running.url + ("/v1" if name == "OPENAI" else "")
            )
            monkeypatch.setenv(f"{name}_API_KEY", "test-key")
        yield running


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.parquet"
    pl.DataFrame({"title": [f"Maple Farm oats {i} g" for i in range(ROWS)]}).write_parquet(path)
    return path


def enrich(catalog: Path, root: Path, provider: str, model: str, cache: str) -> Result:
    args = ["enrich", str(catalog), "--prompt", "Brand of: {title}", "--system", SYSTEM]
    args += ["--model", model, "--provider", provider, "--cache", cache, "--job", f"j-{cache}"]
    args += ["--storage", str(root), "--output", str(root / f"{cache}.parquet")]
    args += ["--poll-interval", "0.1"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def agree(root: Path, job: str, provider: str, model: str, batch: bool) -> pl.DataFrame:
    """The rows' costs equal the price sheet's and the ledger's, to the micro-dollar."""
    rows = pl.read_parquet(root / f"{job.removeprefix('j-')}.parquet")
    price = PriceBook().price(model, provider)
    sheet = sum(
        cost_usd(price, TokenUsage(i, c, w, o), batch)
        for i, c, w, o in rows.select(
            "llm_input_tokens", "llm_cached_tokens", "llm_cache_write_tokens", "llm_output_tokens"
        ).iter_rows()
    )
    with CostLedger(storage_root=str(root)) as ledger:
        entries = ledger.job_entries(job)
    paid = sum(e.cost_usd for e in entries)
    assert abs(rows["llm_cost_usd"].sum() - sheet) < 1e-6
    assert abs(paid - sheet) < 1e-6
    assert sum(e.cached_input_tokens for e in entries) == rows["llm_cached_tokens"].sum()
    assert sum(e.cache_write_tokens for e in entries) == rows["llm_cache_write_tokens"].sum()
    return rows


def test_anthropic_batch_reads_the_shared_prompt_from_cache(
    server: EmulatorServer, catalog: Path, tmp_path: Path
) -> None:
    model = "claude-sonnet-4-5"
    on = enrich(catalog, tmp_path / "on", "anthropic", model, "auto")
    cached = agree(tmp_path / "on", "j-auto", "anthropic", model, batch=True)
    stats = server.stats()
    enrich(catalog, tmp_path / "off", "anthropic", model, "off")
    plain = agree(tmp_path / "off", "j-off", "anthropic", model, batch=True)

    assert cached.height == plain.height == ROWS
    assert (cached["llm_status"] == "succeeded").all()
    # one shard: its first request writes the prefix, the other 999 read it
    assert (cached["llm_cache_write_tokens"] > 0).sum() == 1
    assert (cached["llm_cached_tokens"] > 0).sum() == ROWS - 1
    share = cached["llm_cached_tokens"].sum() / cached["llm_input_tokens"].sum()
    assert share > 0.95
    assert plain["llm_cached_tokens"].sum() == plain["llm_cache_write_tokens"].sum() == 0
    assert (cached["llm_input_tokens"] == plain["llm_input_tokens"]).all()  # same work
    assert cached["llm_cost_usd"].sum() < 0.2 * plain["llm_cost_usd"].sum()
    assert stats["cache_read_tokens"] == cached["llm_cached_tokens"].sum()
    assert stats["cache_write_tokens"] == cached["llm_cache_write_tokens"].sum()
    assert server.stats()["bodies_billed_twice"] == 0
    assert "cache saved" in on.output and "prompt cache" in on.output


@pytest.mark.slow  # 1,000 paced real-time requests: about 45 s
def test_openai_realtime_reads_the_shared_prompt_from_cache(
    server: EmulatorServer, catalog: Path, tmp_path: Path
) -> None:
    model = "gpt-4.1-mini"  # cached input at 25% of the input price
    enrich(catalog, tmp_path / "on", "openai-realtime", model, "auto")
    cached = agree(tmp_path / "on", "j-auto", "openai-realtime", model, batch=False)
    enrich(catalog, tmp_path / "off", "openai-realtime", model, "off")
    plain = agree(tmp_path / "off", "j-off", "openai-realtime", model, batch=False)

    assert (cached["llm_cache_write_tokens"] == 0).all()  # OpenAI writes for free
    # requests run concurrently: a few may start before the first one wrote the prefix
    assert (cached["llm_cached_tokens"] > 0).sum() > 0.9 * ROWS
    assert plain["llm_cached_tokens"].sum() > 0  # OpenAI caches without hints too
    with CostLedger(storage_root=str(tmp_path / "on")) as ledger:
        [report] = ledger.report(by="job")
    uncached = report["cost_usd"] + report["cache_savings_usd"]
    price = PriceBook().price(model, "openai-realtime")
    tokens = cached.select(pl.col("llm_input_tokens", "llm_output_tokens").sum()).row(0)
    assert uncached == pytest.approx(cost_usd(price, TokenUsage(tokens[0], 0, 0, tokens[1]), False))
    assert report["cost_usd"] < 0.5 * uncached  # reads at a quarter of the input price


def test_gemini_batch_reads_the_shared_instruction_implicitly(
    server: EmulatorServer, catalog: Path, tmp_path: Path
) -> None:
    model = "gemini-2.5-flash"
    enrich(catalog, tmp_path / "on", "gemini", model, "auto")
    cached = agree(tmp_path / "on", "j-auto", "gemini", model, batch=True)
    assert (cached["llm_cached_tokens"] > 0).sum() == ROWS - 1  # the first line writes
    assert cached["llm_cache_write_tokens"].sum() == 0
