"""Hostile case: a batch's results that a gateway never serves (it answers every
``GET /files/{id}/content`` 500 the same way, after the rows were billed). The download ends
after a short bound with one line (the 30-minute outage window is for an unreachable provider),
and the batch stays adoptable: the rerun after the fix downloads it without sending again."""

from pathlib import Path

import polars as pl
import pytest

from tests.e2e.hostile import before_and_after_fix, outcome_line, retrying_lines, table_job

ROWS = 10


@pytest.mark.slow  # ~25-38 s: a download retried until it gives up, then a rerun
def test_a_download_that_always_fails_ends_in_seconds_and_the_rerun_adopts_the_batch(
    tmp_path: Path,
) -> None:
    args = table_job(tmp_path, "enrich", "openai", ROWS, "--poll-interval", "0.1")
    run = before_and_after_fix("failing-download", args)
    assert run.broken.returncode == 4, run.broken.stderr  # stopped, as the README's table says
    line = outcome_line(run.broken.stderr)
    assert "answered 500 the same way 8 times in a row: No connected db." in line, line
    assert "rerun the same command" in line and "/content" in line
    assert retrying_lines(run.broken.stderr)  # said while it retried
    assert run.took < 60  # not the 30-minute outage window
    assert (run.before["batches_created"], run.before["requests_billed"]) == (1, ROWS)
    assert run.fixed.returncode == 0, run.fixed.stderr
    assert run.after["batches_created"] == 1  # adopted, not sent again
    assert run.after["requests_billed"] == ROWS and run.after["bodies_billed_twice"] == 0
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
