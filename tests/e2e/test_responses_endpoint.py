"""``maple enrich --endpoint responses``: OpenAI's Responses API in batch, real time and flex,
against the emulator over HTTP, with a reasoning model whose reasoning tokens are billed as
output; through a kill -9 and a rerun nothing is paid twice, and the ledger equals the rows."""

import json
import os
import re
import subprocess
import sys
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

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 24
EFFORT = {"high": 8, "medium": 4, "low": 2}  # the emulator's reasoning tokens per answer token
SCHEMA = {
    "type": "object",
    "properties": {"brand": {"type": "string"}},
    "required": ["brand"],
    "additionalProperties": False,
}


def table(path: Path) -> Path:
    pl.DataFrame({"title": [f"Maple Farm oats {i}" for i in range(ROWS)]}).write_parquet(path)
    return path


def args(source: Path, work: Path, provider: str, *extra: str) -> list[str]:
    return [
        "enrich", str(source), "--prompt", "Brand of {title}", "--model", "o4-mini",
        "--provider", provider, "--endpoint", "responses", "--job", "think",
        "--storage", str(work / "s"), "--output", str(work / "out.parquet"),
        "--param", 'reasoning={"effort": "high"}', "--poll-interval", "0.1",
        "--max-requests-per-batch", "8", *extra,
    ]  # fmt: skip


def check_rows_and_ledger(work: Path, provider: str, *, batch_prices: bool) -> pl.DataFrame:
    """Every row answered with its reasoning; row costs and the ledger equal the price sheet."""
    rows = pl.read_parquet(work / "out.parquet")
    assert rows["llm_status"].to_list() == ["succeeded"] * ROWS, rows["llm_error"].to_list()
    assert rows["llm_response"].str.starts_with("echo: Brand of Maple Farm oats").all()
    visible = rows["llm_output_tokens"] - rows["llm_reasoning_tokens"]
    assert (rows["llm_reasoning_tokens"] == visible * EFFORT["high"]).all()
    assert (visible > 0).all()
    price = PriceBook().price("o4-mini", provider)
    sheet = sum(
        cost_usd(price, TokenUsage(i, c, w, o), batch=batch_prices)
        for i, c, w, o in rows.select(
            "llm_input_tokens", "llm_cached_tokens", "llm_cache_write_tokens", "llm_output_tokens"
        ).iter_rows()
    )
    assert abs(rows["llm_cost_usd"].sum() - sheet) < 1e-6
    with CostLedger(storage_root=str(work / "s")) as ledger:
        [report] = ledger.report(by="job")
    assert abs(report["cost_usd"] - sheet) < 1e-6
    assert report["reasoning_tokens"] == rows["llm_reasoning_tokens"].sum()
    assert report["output_tokens"] == rows["llm_output_tokens"].sum()
    return rows


def test_a_responses_batch_with_a_schema_bills_reasoning_as_output(tmp_path: Path) -> None:
    source = table(tmp_path / "in.parquet")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as server:
        env = {"MAPLE_EMULATOR_URL": server.url}
        argv = args(source, tmp_path, "emulator", "--response-schema", str(schema))
        before = CliRunner(env=env).invoke(main, [*argv, "--dry-run"], catch_exceptions=False)
        result = CliRunner(env=env).invoke(main, argv, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        after = CliRunner(env=env).invoke(main, [*argv, "--dry-run", "--no-reuse"])
        stats = server.stats()
    assert "reasoning tokens cannot be foreseen" in before.output, before.output
    each = re.search(r"reasoning +~(\d+) tokens per request \(this job's 24 sent", after.output)
    assert each is not None, after.output
    rows = pl.read_parquet(tmp_path / "out.parquet")
    assert rows["llm_status"].to_list() == ["succeeded"] * ROWS
    assert int(each.group(1)) == round(rows["llm_reasoning_tokens"].mean())  # type: ignore[arg-type]
    assert all(p["brand"] for p in rows["llm_parsed"].to_list())
    assert (rows["llm_reasoning_tokens"] > 0).all()
    assert stats["batches_created"] == ROWS // 8
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert "reasoning" in result.output and "of output spent reasoning" in result.output


@pytest.mark.parametrize(
    ("provider", "batch_prices"), [("openai-realtime", False), ("openai-flex", True)]
)
def test_responses_in_real_time_and_flex(
    provider: str, batch_prices: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = table(tmp_path / "in.parquet")
    with EmulatorServer(EmulatorConfig(flex_delay_s=0.01)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        result = CliRunner().invoke(main, args(source, tmp_path, provider, "--quiet"))
        assert result.exit_code == 0, result.output
        stats = server.stats()
    check_rows_and_ledger(tmp_path, provider, batch_prices=batch_prices)
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["flex_requests"] == (ROWS if provider == "openai-flex" else 0)


@pytest.mark.parametrize(
    "point", ["after_create", pytest.param("after_results", marks=pytest.mark.slow)]
)
def test_a_responses_batch_killed_and_rerun_pays_nothing_twice(point: str, tmp_path: Path) -> None:
    source = table(tmp_path / "in.parquet")
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as server:
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        argv = [MAPLE, *args(source, tmp_path, "emulator", "--quiet")]
        crashed = subprocess.run(
            argv,
            env={**env, "MAPLE_CRASH_AT": point},
            capture_output=True,
            timeout=300,
            check=False,
        )
        assert crashed.returncode == -9, crashed.stderr[-2000:]
        rerun = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        stats = server.stats()
    check_rows_and_ledger(tmp_path, "emulator", batch_prices=True)
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--endpoint", "responses", "--provider", "anthropic"], "does not serve the Responses"),
        (["--endpoint", "responses", "--param", "max_tokens=50"], "use max_output_tokens"),
        (["--param", "max_output_tokens=50"], "use max_completion_tokens"),
        (["--param", 'reasoning={"effort": "low"}'], "use reasoning_effort"),
        (["--model", "gpt-4o-mini", "--param", 'reasoning_effort="low"'], "not a reasoning"),
        (
            [
                "--provider",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
                "--param",
                'thinking={"type": "enabled", "budget_tokens": 500}',
            ],
            "at least 1,024",
        ),
    ],
)
def test_a_parameter_the_api_refuses_is_one_line_before_any_upload(
    extra: list[str], says: str, tmp_path: Path
) -> None:
    source = table(tmp_path / "in.parquet")
    with EmulatorServer(EmulatorConfig()) as server:
        argv = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", "o4-mini"]
        argv += ["--provider", "emulator", "--storage", str(tmp_path / "s"), *extra]
        env = {"MAPLE_EMULATOR_URL": server.url, "ANTHROPIC_API_KEY": "k"}
        result = CliRunner(env=env).invoke(main, argv)
        stats = server.stats()
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert stats["files_uploaded"] == 0
    assert stats["requests_billed"] == 0


@pytest.mark.parametrize(("provider", "accepted"), [("xai", True), ("together", False)])
def test_an_openai_compatible_profile_takes_responses_where_its_vendor_does(
    provider: str, accepted: bool, tmp_path: Path
) -> None:
    source = table(tmp_path / "in.parquet")
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as server:
        variable = provider.upper()
        env = {f"{variable}_BASE_URL": f"{server.url}/v1", f"{variable}_API_KEY": "k"}
        argv = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", "o4-mini"]
        argv += ["--provider", provider, "--endpoint", "responses", "--quiet"]
        argv += ["--storage", str(tmp_path / "s"), "--poll-interval", "0.1"]
        argv += ["--output", str(tmp_path / "out.parquet"), "--allow-untracked-cost"]
        result = CliRunner(env=env).invoke(main, argv)
        stats = server.stats()
    if accepted:
        assert result.exit_code == 0, result.output
        rows = pl.read_parquet(tmp_path / "out.parquet")
        assert rows["llm_status"].to_list() == ["succeeded"] * ROWS
        assert (rows["llm_reasoning_tokens"] > 0).all()  # o4-mini through /v1/responses
    else:
        assert result.exit_code == 2 and "does not serve the Responses API" in result.output
        assert stats["files_uploaded"] == 0
