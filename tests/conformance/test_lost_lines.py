"""The promise every batch name keeps of lines its provider loses or repeats: a batch that
says it completed while its results lack a share of the answered lines, and hold a share of
them twice (``maple emulator --drop-lines``, ``--duplicate-lines``), still ends with every
row answered once, each request billed once, and the lost lines named and resent."""

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.server import EmulatorServer
from tests.conformance.cases import CASES, Case
from tests.conformance.conftest import module_emulator
from tests.conformance.jobs import is_batch, job_args, ok, output, run, with_known_failure

SHARE = 0.2  # of the answered lines lost, and of them written twice


@pytest.fixture(scope="module")
def lossy_server(s3_url: str) -> Iterator[EmulatorServer]:
    yield from module_emulator(s3_url, seed=5, drop_lines=SHARE, duplicate_lines=SHARE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [with_known_failure(c, "lost_lines") for c in CASES if is_batch(c)]
)
def test_lost_and_repeated_lines_end_with_each_row_answered_once(
    case: Case, lossy_server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    lossy_server.reset()
    rows = max(case.rows, 20)
    done = run(case, lossy_server.url, s3_url, *job_args(case, tmp_path, rows=rows))
    ok(done)
    out = output(tmp_path)
    assert out.height == rows and out["llm_status"].unique().to_list() == ["succeeded"]
    stats = lossy_server.stats()
    assert stats["lines_dropped"] > 0 and stats["lines_duplicated"] > 0, stats
    assert out.filter(pl.col("llm_attempts") > 1).height > 0  # the lost lines were resent
    assert stats["requests_billed"] == rows and stats["bodies_billed_twice"] == 0, stats
