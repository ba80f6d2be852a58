"""Hostile case: a configuration the provider refuses, through a gateway in front of the
emulator (a header the gateway requires, a model it does not have, a parameter the model does not
take). It is a job error, never a row outcome: ``maple enrich`` / ``maple embed`` stop at first
contact with exit 2 and one line holding the gateway's own message, no row becomes a final
failure, and the rerun after the fix sends every row once."""

from pathlib import Path

import polars as pl
import pytest

from tests.e2e.hostile import before_and_after_fix, one_line, outcome_line, table_job

ROWS = 10
MESSAGES = {
    "missing-header": "Either x-portkey-config or x-portkey-provider header is required",
    "unknown-model": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
    "unsupported-parameter": "Unsupported parameter: 'temperature' is not supported",
}


@pytest.mark.slow
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


def test_a_response_format_the_server_does_not_take_is_exit_2_and_sends_no_more(
    tmp_path: Path,
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"brand": {"type": "string"}}, "required": ["brand"], '
        '"additionalProperties": false}'
    )
    extra = ("--response-schema", str(schema), "--poll-interval", "0.1")
    args = table_job(tmp_path, "enrich", "openai-realtime", ROWS, *extra)
    run = before_and_after_fix("schema-500", args)
    assert run.broken.returncode == 2, run.broken.stderr
    line = outcome_line(run.broken.stderr)
    assert "response_format type json_schema is not supported, use json_object" in line, line
    assert "refused 2 different requests the same way" in line
    assert run.before["requests_billed"] == 0  # two requests, twice each, none forwarded
    assert run.fixed.returncode == 0, run.fixed.stderr
    assert run.after["requests_billed"] == ROWS and run.after["bodies_billed_twice"] == 0
