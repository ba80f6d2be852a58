"""Mistral through the real wire: what ``--provider mistral`` does that the conformance suite
(``tests/conformance``, which runs ``mistral`` and ``mistral-realtime`` to their end, kills them
and cancels them) does not hold every provider to. A failed line's body is a JSON string of
Mistral's error object: its message and class reach the row, billed nothing."""

from pathlib import Path

import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import table_job

ROWS = 12
MODEL = "mistral-small-latest"


def test_lines_mistral_failed_come_back_as_failed_rows_billed_nothing(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, fail={"invalid_request": 1.0})
    with EmulatorServer(config) as server:
        args = table_job(tmp_path, "enrich", "mistral", ROWS, "--poll-interval", "0.1")
        args[args.index("--model") + 1] = MODEL
        env = {"MISTRAL_BASE_URL": server.url, "MISTRAL_API_KEY": "mistral-key"}
        done = maple(*args, clean=True, drop=("MISTRAL_",), **env)
        stats = server.stats()
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert done.returncode == 3, done.stderr  # every row failed
    assert out["llm_status"].unique().to_list() == ["failed"]
    assert out["llm_failure_class"].unique().to_list() == ["invalid_request"]
    assert out["llm_error"].str.starts_with("Invalid request: ").all()
    assert stats["requests_billed"] == 0 and stats["batches_created"] == 1
