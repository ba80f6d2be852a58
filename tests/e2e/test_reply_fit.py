"""A reply that can never fit the job: a server (or a gateway before it) that ignores
``--dimensions`` answers vectors of the model's own length. The job stops at the first such
reply, in one line naming the lengths (exit 4), keeps none of it, and the rerun after the fix
sends those rows and finishes; nothing is reused from the server that ignored the length. So for
a server that ignores the response schema."""

import dataclasses
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.hostile import before_and_after_fix, maple_at, outcome_line, table_job

ROWS = 40
ASKED = 8  # the emulator's own length is 16


@pytest.mark.parametrize(
    "provider", ["openai-realtime", pytest.param("openai-server", marks=pytest.mark.slow)]
)
def test_vectors_of_another_length_stop_the_job_at_the_first_and_the_rerun_sends_them(
    tmp_path: Path, provider: str
) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    args = [
        "embed", str(table), "--text", "{title}", "--model", "text-embedding-3-small",
        "--dimensions", str(ASKED), "--provider", provider, "--storage", str(tmp_path / "store"),
        "--job", "fit", "--quiet", "--max-requests-per-batch", "10",
    ]  # fmt: skip
    server_env = {"MAPLE_BASE_URL": "", "MAPLE_API_KEY": "k"}
    with EmulatorServer(EmulatorConfig(batch_seconds=0, ignore_dimensions=True)) as ignoring:
        env = {**server_env, "MAPLE_BASE_URL": f"{ignoring.url}/v1"}
        stopped, took = maple_at(ignoring.url, *args, **env)
        paid = ignoring.stats()
    assert stopped.returncode == 4, stopped.stderr
    line = outcome_line(stopped.stderr)
    assert "16-value vectors where --dimensions asked for 8" in line, line
    assert "does not shorten vectors" in line and "sk-hostile" not in stopped.stderr
    assert not list(tmp_path.glob("items_*.parquet"))  # no output of wrong vectors
    assert paid["requests_received"] == 1, paid  # the first contact alone (10 texts in it)
    assert took < 30
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as fixed:
        env = {**server_env, "MAPLE_BASE_URL": f"{fixed.url}/v1"}
        done, _ = maple_at(fixed.url, *args, **env)
        sent = fixed.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert out["llm_embedding"].arr.len().unique().to_list() == [ASKED]
    assert sent["requests_billed"] >= 1 and sent["bodies_billed_twice"] == 0


@pytest.mark.slow
def test_a_batch_of_vectors_of_another_length_stops_the_job_and_the_rerun_sends_its_rows(
    tmp_path: Path,
) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    args = [
        "embed", str(table), "--text", "{title}", "--model", "text-embedding-3-small",
        "--dimensions", str(ASKED), "--provider", "openai", "--storage", str(tmp_path / "store"),
        "--job", "fit", "--quiet", "--poll-interval", "0.1",
    ]  # fmt: skip
    config = EmulatorConfig(batch_seconds=0, control_fail=0)
    with EmulatorServer(dataclasses.replace(config, ignore_dimensions=True)) as ignoring:
        stopped, _ = maple_at(ignoring.url, *args)
        paid = ignoring.stats()
    assert stopped.returncode == 4, stopped.stderr
    line = outcome_line(stopped.stderr)
    assert "16-value vectors where --dimensions asked for 8" in line, line
    assert paid["batches_created"] == 1 and paid["requests_billed"] == ROWS
    with EmulatorServer(config) as fixed:
        done, _ = maple_at(fixed.url, *args)
        sent = fixed.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert out["llm_embedding"].arr.len().unique().to_list() == [ASKED]
    assert sent["requests_billed"] == ROWS  # every row again: none of the wrong ones kept


@pytest.mark.slow  # ~15 s
def test_replies_that_ignore_the_response_schema_stop_the_job_before_every_row_is_paid(
    tmp_path: Path,
) -> None:
    """A server that ignores ``response_format`` answers prose to every row: two rows' replies
    that do not match the schema before any did stop the job (exit 4) in one line, instead of
    paying every row, then again under the retry policy. The rerun after the fix finishes."""
    schema = tmp_path / "schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"brand": {"type": "string"}}, "required": ["brand"], '
        '"additionalProperties": false}'
    )
    args = table_job(tmp_path, "enrich", "openai-realtime", ROWS, "--response-schema", str(schema))
    run = before_and_after_fix("ignores-schema", args)
    assert run.broken.returncode == 4, run.broken.stderr
    line = outcome_line(run.broken.stderr)
    assert "did not match --response-schema before any did" in line, line
    assert "ignores the response format" in line and "sk-hostile" not in run.broken.stderr
    assert run.before["requests_billed"] < ROWS // 2, run.before  # stopped, not every row paid
    assert run.fixed.returncode == 0, run.fixed.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    # the rerun pays each row once; only the prose the broken run was answered is paid again
    assert run.after["requests_billed"] == run.before["requests_billed"] + ROWS, run.after
