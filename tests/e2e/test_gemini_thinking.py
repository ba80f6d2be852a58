"""Gemini's thinking through ``maple enrich`` against the emulator: a thinking budget the model
takes runs and reports its thoughts as ``llm_reasoning_tokens`` (billed as output); a budget or
a level the model would refuse is one line before any upload."""

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main

ROWS = 6


def run(tmp_path: Path, model: str, thinking: str) -> tuple[int, str, dict[str, int]]:
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": [f"oats {i}" for i in range(ROWS)]}).write_parquet(source)
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as server:
        env = {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "k"}
        argv = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", model]
        argv += ["--provider", "gemini", "--storage", str(tmp_path / "s"), "--quiet"]
        argv += ["--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.1"]
        argv += ["--param", f"thinking_config={thinking}"]
        result = CliRunner(env=env).invoke(main, argv)
        return result.exit_code, result.output, server.stats()


def test_thoughts_are_reasoning_tokens_billed_as_output(tmp_path: Path) -> None:
    code, output, stats = run(tmp_path, "gemini-2.5-flash", '{"thinkingBudget": 1024}')
    assert code == 0, output
    rows = pl.read_parquet(tmp_path / "out.parquet")
    answer = (rows["llm_response"].str.len_chars() + 3) // 4
    assert rows["llm_reasoning_tokens"].to_list() == (answer * 4).to_list()  # the emulator's 4x
    assert rows["llm_output_tokens"].to_list() == (answer * 5).to_list()
    assert stats["requests_billed"] == ROWS


@pytest.mark.parametrize(
    ("model", "thinking", "says"),
    [
        ("gemini-2.5-pro", '{"thinkingBudget": 0}', "128 to 32,768"),
        ("gemini-2.5-flash", '{"thinkingLevel": "low"}', "use thinkingBudget"),
        ("gemini-3-flash-preview", '{"thinkingLevel": "low", "thinkingBudget": 64}', "not both"),
    ],
)
def test_thinking_the_model_refuses_is_one_line_before_upload(
    model: str, thinking: str, says: str, tmp_path: Path
) -> None:
    code, output, stats = run(tmp_path, model, thinking)
    assert code == 2, output
    assert says in output
    assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0
