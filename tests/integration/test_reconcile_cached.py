"""A job that reads its shared prompt from the provider's cache reconciles: the emulator bills
cache reads (and Anthropic's 1-hour cache writes) at the rates the ledger books, and its admin
usage reports show them as the providers' do (OpenAI ``input_cached_tokens``; Anthropic
``cache_read_input_tokens`` and ``cache_creation``)."""

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.ledger.costs import CostLedger

ROWS = 40
SYSTEM = "You extract the brand of a grocery product. Rules: " + " ".join(
    f"rule {i}: prefer the manufacturer's name over the retailer's label." for i in range(200)
)  # ~3,400 tokens: over every model's cache minimum here
ADMIN = {"openai": "sk-admin-cached", "anthropic": "sk-ant-admin01-cached"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as running:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{running.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-maple")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-maple")
        monkeypatch.setenv("OPENAI_ADMIN_KEY", ADMIN["openai"])
        monkeypatch.setenv("ANTHROPIC_ADMIN_KEY", ADMIN["anthropic"])
        yield running


def usage_report(server: EmulatorServer, provider: str) -> dict[str, int]:
    """The day's cache figures in the provider's own usage report."""
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if provider == "openai":
        answer = httpx.get(
            f"{server.url}/v1/organization/usage/completions",
            params={"start_time": int(midnight.timestamp()), "group_by": "model"},
            headers={"Authorization": f"Bearer {ADMIN[provider]}"},
        )
        [result] = answer.json()["data"][-1]["results"]
        return {"read": result["input_cached_tokens"], "write": 0}
    answer = httpx.get(
        f"{server.url}/v1/organizations/usage_report/messages",
        params={"starting_at": midnight.strftime("%Y-%m-%dT%H:%M:%SZ"), "group_by[]": "model"},
        headers={"x-api-key": ADMIN[provider]},
    )
    [result] = answer.json()["data"][-1]["results"]
    written = result["cache_creation"]
    assert written["ephemeral_5m_input_tokens"] == 0  # Maple's batches write with a 1-hour TTL
    return {
        "read": result["cache_read_input_tokens"],
        "write": written["ephemeral_1h_input_tokens"],
    }


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-5")]
)
def test_a_cached_job_reconciles(
    provider: str, model: str, server: EmulatorServer, tmp_path: Path
) -> None:
    source = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"Maple Farm oats {i} g" for i in range(ROWS)]}).write_parquet(source)
    root = str(tmp_path / "store")
    args = ["enrich", str(source), "--prompt", "Brand of: {title}", "--system", SYSTEM]
    args += ["--model", model, "--provider", provider, "--job", "cached", "--storage", root]
    args += ["--poll-interval", "0.1", "--quiet", "--output", str(tmp_path / "out.parquet")]
    done = CliRunner().invoke(main, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    with CostLedger(storage_root=root) as ledger:
        entries = ledger.job_entries("cached")
    read = sum(e.cached_input_tokens for e in entries)
    assert read > 0.9 * sum(e.input_tokens for e in entries)  # most input came from the cache
    billed = usage_report(server, provider)
    assert billed["read"] == read
    assert billed["write"] == sum(e.cache_write_tokens for e in entries)

    result = CliRunner().invoke(
        main, ["reconcile", "--provider", provider, "--storage", root], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if model in line]
    assert row.split()[-1] == "ok"
