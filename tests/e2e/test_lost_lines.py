"""Every line accounted for, through ``maple enrich`` as a user runs it: a provider whose
completed batches lose or repeat answered lines (``maple emulator --drop-lines`` and
``--duplicate-lines``) still gives every row one answer, said in the summary, paid once."""

import os
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from tests.e2e.cli import maple


def _enrich(table: Path, store: Path, url: str, *extra: str) -> Any:
    return maple(
        "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(store), "--job", "lines",
        "--output", str(store.parent / "out.parquet"), "--poll-interval", "0.1", *extra,
        url=url, timeout=600,
    )  # fmt: skip


def _summary(stdout: str) -> dict[str, str]:
    """The summary's lines by their first word (sub-lines keep their indent)."""
    return {line[:15].rstrip(): line[15:] for line in stdout.splitlines() if line.strip()}


@pytest.mark.parametrize(
    "rows",
    [200, pytest.param(2000, marks=pytest.mark.slow)],  # 2,000: about 15 s, in the long pass
)
def test_lost_lines_are_resent_and_repeated_ones_merged_once(tmp_path: Path, rows: int) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"thing {i}" for i in range(rows)]}).write_csv(table)
    store = tmp_path / "store"
    config = EmulatorConfig(
        batch_seconds=0.2, drop_lines=0.1, duplicate_lines=0.1, control_fail=0, seed=7
    )
    with EmulatorServer(config) as server:
        run = _enrich(table, store, server.url, "--max-requests-per-batch", str(rows // 2))
        stats = server.stats()
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        shown = CliRunner().invoke(
            main, ["status", "lines", "--storage", str(store), "--format", "json"], env=env
        )
    assert run.returncode == 0, run.stderr
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame["title"].to_list() == [f"thing {i}" for i in range(rows)]  # each row once
    assert frame["llm_status"].unique().to_list() == ["succeeded"]
    assert frame["llm_response"].to_list() == [f"echo: Name thing {i}" for i in range(rows)]
    dropped, repeated = stats["lines_dropped"], stats["lines_duplicated"]
    assert rows // 20 < dropped and rows // 20 < repeated  # about a tenth of the lines each
    resent = frame.filter(pl.col("llm_attempts") > 1).height
    assert 0 < resent <= dropped  # a row lost twice is sent three times
    assert frame["llm_attempts"].sum() == rows + dropped
    # nothing paid twice: each request billed once, however often it was written or resent
    assert stats["requests_billed"] == rows and stats["bodies_billed_twice"] == 0
    said = _summary(run.stdout)
    assert said["lines"] == f"sent {rows:,}, answered {rows:,}, failed 0, missing 0"
    assert said["  missing"].startswith(f"{dropped:,} line(s) absent from ended batches'")
    assert said["  missing"].endswith("resent")
    assert said["  duplicated"].startswith(f"{repeated:,} line(s) repeated in the output")
    assert shown.exit_code == 0, shown.output
    status = orjson.loads(shown.stdout)
    assert status["lines"] == {"sent": rows, "answered": rows, "failed": 0, "missing": 0}
    assert (status["lines_missing"], status["lines_duplicated"]) == (dropped, repeated)
