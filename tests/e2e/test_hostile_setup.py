"""Hostile case: a configuration the provider refuses, through a gateway in front of the
emulator (a header the gateway requires, a model it does not have, a parameter the model does not
take). It is a job error, never a row outcome: ``maple enrich`` / ``maple embed`` stop at first
contact with exit 2 and one line holding the gateway's own message, no row becomes a final
failure, and the rerun after the fix sends every row once."""

from pathlib import Path

import polars as pl
import pytest

from tests.e2e.hostile import before_and_after_fix, one_line, table_job

ROWS = 10
MESSAGES = {
    "missing-header": "Either x-portkey-config or x-portkey-provider header is required",
    "unknown-model": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
    "unsupported-parameter": "Unsupported parameter: 'temperature' is not supported",
}


@pytest.mark.parametrize(
    ("command", "provider", "refusal"),
    [
        ("enrich", "openai-realtime", "missing-header"),
        ("enrich", "openai-realtime", "unknown-model"),
        ("enrich", "openai-realtime", "unsupported-parameter"),
        ("embed", "openai-realtime", "missing-header"),
        ("enrich", "openai", "missing-header"),
        ("embed", "openai", "missing-header"),
    ],
)
def test_a_refused_setup_is_exit_2_in_one_line_and_the_rerun_after_the_fix_sends_every_row(
    tmp_path: Path, command: str, provider: str, refusal: str
) -> None:
    args = table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1")
    run = before_and_after_fix(refusal, args)
    assert run.broken.returncode == 2, run.broken.stderr
    line = one_line(run.broken.stderr)
    assert line.startswith("error: ") and MESSAGES[refusal] in line, line
    assert run.url in line and "sk-hostile-test-key" not in run.broken.stderr + run.broken.stdout
    assert run.took < 30
    assert run.before["requests_billed"] == 0 and run.before["files_uploaded"] == 0
    # no row was failed for it: the rerun sends every row, once
    assert run.fixed.returncode == 0, run.fixed.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert run.after["requests_billed"] == ROWS
    assert run.after["bodies_billed_twice"] == 0
