"""``ANTHROPIC_VERSION``: the anthropic-version Maple sends, against the emulator (which serves
2023-06-01 and 2026-10-21 and refuses what each refuses): a model parameter the chosen version
removed is one line before any upload; the same job runs under either version without it."""

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main

ROWS = 6


def run(tmp_path: Path, version: str | None, *extra: str) -> tuple[int, str, dict[str, int]]:
    source = tmp_path / "in.parquet"
    pl.DataFrame({"title": [f"oats {i}" for i in range(ROWS)]}).write_parquet(source)
    with EmulatorServer(EmulatorConfig(batch_seconds=0.1)) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "k"}
        if version is not None:
            env["ANTHROPIC_VERSION"] = version
        argv = ["enrich", str(source), "--prompt", "Brand of {title}"]
        argv += ["--model", "claude-haiku-4-5", "--provider", "anthropic", "--quiet"]
        argv += ["--storage", str(tmp_path / "s"), "--poll-interval", "0.1", *extra]
        result = CliRunner(env=env).invoke(main, argv)
        return result.exit_code, result.output, server.stats()


@pytest.mark.parametrize("version", ["2026-10-21", None])
def test_the_job_runs_under_either_version(version: str | None, tmp_path: Path) -> None:
    code, output, stats = run(tmp_path, version)
    assert code == 0, output
    assert stats["requests_billed"] == ROWS


def test_a_parameter_the_version_removed_is_refused_before_any_upload(tmp_path: Path) -> None:
    code, output, stats = run(tmp_path, "2026-10-21", "--param", "temperature=0.2")
    assert code == 2, output
    assert "--param temperature" in output and "ANTHROPIC_VERSION=2023-06-01" in output
    assert stats["requests_received"] == 0 and stats["requests_billed"] == 0


def test_the_older_version_takes_it(tmp_path: Path) -> None:
    code, output, stats = run(tmp_path, "2023-06-01", "--param", "temperature=0.2")
    assert code == 0, output
    assert stats["requests_billed"] == ROWS


def test_an_unknown_version_is_one_line(tmp_path: Path) -> None:
    code, output, stats = run(tmp_path, "2024-13-01")
    assert code == 2, output
    assert "ANTHROPIC_VERSION='2024-13-01'" in output and "2026-10-21" in output
    assert stats["requests_received"] == 0
