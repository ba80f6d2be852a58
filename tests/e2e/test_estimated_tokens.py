"""Replies that report no token usage (a Gemini embedding reply without ``usageMetadata``, an
OpenAI-compatible server that sends no ``usage``), against the emulator's ``--no-usage`` mode
over HTTP: the rows' tokens are estimated from their text as pre-flight estimates them, marked
``llm_tokens_estimated``, priced, and booked in the ledger as estimated (never $0)."""

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main

ROWS = 10


def table(path: Path) -> Path:
    titles = [f"catalog item number {i}" + "x" * i for i in range(ROWS)]
    pl.DataFrame({"title": titles}).write_parquet(path)
    return path


def costs(storage: Path) -> dict[str, int]:
    result = CliRunner().invoke(
        main, ["costs", "--storage", str(storage), "--by", "job", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)
    return dict(row)


@pytest.mark.parametrize("omit", [True, False])
def test_a_chat_batch_without_usage_is_estimated_and_priced(omit: bool, tmp_path: Path) -> None:
    source = table(tmp_path / "in.parquet")
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1, omit_usage=omit)) as server:
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-maple"}
        argv = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", "gpt-4o-mini"]
        argv += ["--provider", "openai", "--storage", str(tmp_path / "s"), "--quiet"]
        argv += ["--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.1"]
        result = CliRunner(env=env).invoke(main, argv)
        assert result.exit_code == 0, result.output
        assert server.stats()["requests_billed"] == ROWS
        env["OPENAI_ADMIN_KEY"] = "sk-admin-estimates"
        checked = CliRunner(env=env).invoke(
            main, ["reconcile", "--provider", "openai", "--storage", str(tmp_path / "s")]
        )
    rows = pl.read_parquet(tmp_path / "out.parquet")
    assert rows["llm_tokens_estimated"].to_list() == [omit] * ROWS
    # the estimate is the emulator's own count: user message + 3, reply priming 3
    prompts = [(len(f"Brand of {t}") + 3) // 4 + 6 for t in rows["title"]]
    replies = [(len(r) + 3) // 4 for r in rows["llm_response"]]
    assert rows["llm_input_tokens"].to_list() == prompts
    assert rows["llm_output_tokens"].to_list() == replies
    assert (rows["llm_cost_usd"] > 0).all()
    booked = costs(tmp_path / "s")
    estimated = sum(prompts) + sum(replies) if omit else 0
    assert booked["estimated_tokens"] == estimated
    assert abs(booked["cost_usd"] - rows["llm_cost_usd"].sum()) < 1e-9
    # the emulator's own bill counts exactly what the estimate counted: no drift either way
    assert checked.exit_code == 0, checked.output
    said = f"estimated: {estimated:,} of the ledger's {estimated:,} tokens are estimates"
    assert (said in checked.output) == omit, checked.output


@pytest.mark.parametrize("provider", ["gemini", "gemini-realtime"])
def test_gemini_embeddings_without_usage_metadata_are_estimated(
    provider: str, tmp_path: Path
) -> None:
    source = table(tmp_path / "in.parquet")
    config = EmulatorConfig(batch_seconds=0.1, omit_usage=True)
    with EmulatorServer(config) as server:
        env = {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "test-key"}
        argv = ["embed", str(source), "--text", "Product: {title}"]
        argv += ["--model", "gemini-embedding-001", "--dimensions", "8", "--provider", provider]
        argv += ["--storage", str(tmp_path / "s"), "--output", str(tmp_path / "out.parquet")]
        argv += ["--poll-interval", "0.1", "--quiet", "--max-requests-per-batch", "4"]
        result = CliRunner(env=env).invoke(main, argv)
        assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "out.parquet")
    assert rows["llm_tokens_estimated"].to_list() == [True] * ROWS
    texts = [f"Product: {t}" for t in rows["title"]]
    assert rows["llm_input_tokens"].to_list() == [max(1, (len(t) + 3) // 4) for t in texts]
    assert (rows["llm_cost_usd"] > 0).all()
    assert costs(tmp_path / "s")["estimated_tokens"] == rows["llm_input_tokens"].sum()
