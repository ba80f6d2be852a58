"""Mistral through the real wire: ``--provider mistral`` (its own batch jobs: ``/v1/files``,
``/v1/batch/jobs``, lines of ``custom_id`` and ``body``) and ``mistral-realtime`` against the
emulator's Mistral routes, each run to its end by the ``maple`` CLI: every row, each billed once,
booked by ``maple costs`` at Mistral's prices. A kill -9 after the job's create, then the same
command, adopts the job by its metadata and pays nothing twice. Lines Mistral failed come back as
failed rows, billed nothing. A missing key is one line, exit 2, nothing sent."""

import json
import subprocess
import sys
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.hostile import clean_env, one_line, table_job

ROWS = 12
MODEL = "mistral-small-latest"


def maple(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``maple ARGS`` with ``env`` and no Mistral setting of the caller's environment."""
    base = {k: v for k, v in clean_env(**env).items() if not k.startswith("MISTRAL_")}
    return subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True, text=True, env={**base, **env}, timeout=180, check=False,
    )  # fmt: skip


def mistral(url: str) -> dict[str, str]:
    return {"MISTRAL_BASE_URL": url, "MISTRAL_API_KEY": "mistral-key"}


def job(tmp_path: Path, provider: str, *extra: str) -> list[str]:
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1", *extra)
    args[args.index("--model") + 1] = MODEL
    return args


def booked(tmp_path: Path) -> list[dict[str, object]]:
    shown = maple("costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout))


def jobs(url: str) -> list[dict[str, object]]:
    answer = httpx.get(
        f"{url}/v1/batch/jobs", headers={"Authorization": "Bearer mistral-key"}, timeout=10
    )
    return list(answer.json()["data"])


@pytest.mark.parametrize("provider", ["mistral", "mistral-realtime"])
def test_a_job_runs_to_its_end_on_mistrals_routes_and_is_booked(
    tmp_path: Path, provider: str
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        done = maple(
            *job(tmp_path, provider, "--max-requests-per-batch", "5"), **mistral(server.url)
        )
        stats = server.stats()
        made = jobs(server.url)
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert out["llm_response"].to_list() == [f"echo: About thing {i}" for i in range(ROWS)]
    assert (out["llm_cost_usd"] > 0).all()  # genai-prices knows Mistral's models
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    if provider == "mistral":
        assert stats["batches_created"] == 3 == len(made)
        assert {(j["status"], j["model"], j["endpoint"]) for j in made} == {
            ("SUCCESS", MODEL, "/v1/chat/completions")
        }
    else:
        assert stats["batches_created"] == 0 and stats["realtime_requests"] > 0
    [row] = booked(tmp_path)
    assert row["job"] == "hostile" and row["requests"] == ROWS
    assert float(str(row["cost_usd"])) == pytest.approx(out["llm_cost_usd"].sum())
    batch_priced = float(str(row["savings_usd"])) > 0  # booked at Mistral's 50% batch price
    assert batch_priced == (provider == "mistral")


def test_a_kill_9_after_the_create_then_the_same_command_adopts_the_job(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, control_fail=0)) as server:
        args = job(tmp_path, "mistral", "--max-requests-per-batch", "5")
        killed = maple(*args, **mistral(server.url), MAPLE_CRASH_AT="after_create")
        resumed = maple(*args, **mistral(server.url))
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3  # the job created before the kill was adopted


@pytest.mark.parametrize("provider", ["mistral", "mistral-realtime"])
def test_a_missing_key_is_one_line_and_exit_2_before_anything_is_sent(
    tmp_path: Path, provider: str
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        run = maple(*job(tmp_path, provider), MISTRAL_BASE_URL=server.url)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and "MISTRAL_API_KEY is not set" in line, line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


def test_lines_mistral_failed_come_back_as_failed_rows_billed_nothing(tmp_path: Path) -> None:
    """A failed line's body is a JSON string of Mistral's error object: its message and class
    reach the row."""
    config = EmulatorConfig(batch_seconds=0, control_fail=0, fail={"invalid_request": 1.0})
    with EmulatorServer(config) as server:
        done = maple(*job(tmp_path, "mistral"), **mistral(server.url))
        stats = server.stats()
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert done.returncode == 3, done.stderr  # every row failed
    assert out["llm_status"].unique().to_list() == ["failed"]
    assert out["llm_failure_class"].unique().to_list() == ["invalid_request"]
    assert out["llm_error"].str.starts_with("Invalid request: ").all()
    assert stats["requests_billed"] == 0 and stats["batches_created"] == 1
