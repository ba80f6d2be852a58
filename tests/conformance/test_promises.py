"""The promises every provider keeps, each held on every case of `CASES` against one emulator:

a. a job runs to its end and is booked once: exit 0, every row succeeded, each row billed once
   at the provider, the ledger books the rows once at the price the name is billed at (batch
   prices on a batch API or a flex tier, none on a self-hosted server), the key never shown;
c. a wrong API key is one line and exit 2 before any row is sent: no row reaches the server
   that refused it on a batch API; on a real-time one, only the first contact (refused, billed
   nothing);
   a missing key is one line and exit 2 naming the variable, nothing sent;
d. a line the provider failed (among lines it answered) comes back as a failed row, billed
   nothing;
e. ``maple embed`` runs to its end where the provider embeds.

The kill -9 and ``maple cancel`` promises are in ``test_interrupts.py``.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.providers.registry import capabilities
from tests.conformance.cases import CASES, KEY, Case
from tests.conformance.conftest import module_emulator
from tests.conformance.jobs import (
    booked,
    environment,
    is_batch,
    job_args,
    ok,
    output,
    run,
    with_known_failure,
)
from tests.e2e.cli import NO_AWS
from tests.e2e.hostile import one_line

#: the developer's settings a run in this process must not see
SETTINGS = ("AWS_", "MAPLE_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "MISTRAL_", "AZURE_", "GROQ_")
SETTINGS += ("TOGETHER_", "XAI_", "DOUBLEWORD_", "DEEPINFRA_", "OPENROUTER_")


def cases(promise: str, cheap: bool = False) -> list[object]:
    return [with_known_failure(case, promise, cheap) for case in CASES]


def billed_once(stats: dict[str, int], case: Case, rows: int) -> None:
    assert stats["requests_billed"] == rows and stats["bodies_billed_twice"] == 0, stats
    if is_batch(case):
        assert stats["batches_created"] == case.batches, stats
    else:
        assert stats["batches_created"] == 0 and stats["realtime_requests"] > 0, stats


@pytest.mark.parametrize("case", cases("runs", cheap=True))
def test_a_job_runs_to_its_end_and_is_booked_once(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    done = run(case, server.url, s3_url, *job_args(case, tmp_path))
    ok(done)
    out = output(tmp_path)
    assert out["llm_status"].to_list() == ["succeeded"] * case.rows
    assert out["llm_response"].to_list() == [f"echo: About thing {i}" for i in range(case.rows)]
    billed_once(server.stats(), case, case.rows)
    [row] = booked(case, tmp_path, s3_url)
    assert row["requests"] == case.rows, row
    assert float(row["cost_usd"]) == pytest.approx(out["llm_cost_usd"].sum())
    billed_as = capabilities(case.provider)
    priced = not billed_as.self_hosted
    assert (out["llm_cost_usd"] > 0).all() == priced
    batch_priced = priced and (is_batch(case) or billed_as.batch_prices)
    assert (float(row["savings_usd"]) > 0) == batch_priced, row
    assert KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "case", [with_known_failure(c, "wrong_key", cheap=True) for c in CASES if c.key]
)
def test_a_wrong_key_is_one_line_and_exit_2_before_any_row_is_sent(
    case: Case, refusing_url: str, refused_bodies: list[bytes], tmp_path: Path
) -> None:
    assert case.key is not None
    env = {case.key: "sk-wrong"} | ({"AWS_ENDPOINT_URL_S3": refusing_url} if case.on_s3 else {})
    refused = run(case, refusing_url, refusing_url, *job_args(case, tmp_path), **env)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert one_line(refused.stderr).startswith("error: "), refused.stderr
    rows_sent = [body for body in refused_bodies if b"thing " in body]
    assert len(rows_sent) <= (0 if is_batch(case) else 1), rows_sent


@pytest.mark.parametrize("case", [with_known_failure(c, "missing_key") for c in CASES if c.key])
def test_a_missing_key_is_one_line_and_exit_2_naming_it_before_anything_is_sent(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    """In-process (click's runner: the real command, no interpreter start-up): the check comes
    before the job's graph runs."""
    assert case.key is not None
    given = {k: v for k, v in environment(case, server.url, s3_url).items() if k != case.key}
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith(SETTINGS)}
    args = job_args(case, tmp_path)
    result = CliRunner().invoke(main, args, env={**unset, **NO_AWS, **given})
    assert result.exit_code == 2, result.output
    line = one_line(result.stderr)
    assert line.startswith("error: ") and case.key in line, line
    stats = server.stats()
    assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0, stats


FAILED_SHARE = 0.2  # of the lines the emulator fails as invalid requests
FAULT_SEED = 1  # one whose draws answer each real-time name's first row (see below)


@pytest.fixture(scope="module")
def failing_server(s3_url: str) -> Iterator[EmulatorServer]:
    """An emulator that fails a fifth of the lines as invalid requests (drawn from each body
    and the seed: the same lines in every run)."""
    faults = {"invalid_request": FAILED_SHARE}
    yield from module_emulator(s3_url, seed=FAULT_SEED, fail=faults)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("failed_line"))
def test_a_failed_line_is_a_failed_row_billed_nothing(
    case: Case, failing_server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    """Among lines answered. A real-time name sends one row at a time here (one shard, one
    request in flight), so the same rows come first in every run: two rows refused alike
    before any is answered read as the job's setup, not its rows (exit 2, no row failed), and
    `FAULT_SEED` answers each name's first rows."""
    failing_server.reset()
    rows = max(case.rows, 20)
    in_order = ("--max-concurrency", "1", "--max-requests-per-batch", str(rows))
    args = job_args(case, tmp_path, "enrich", *(() if is_batch(case) else in_order), rows=rows)
    done = run(case, failing_server.url, s3_url, *args)
    assert done.returncode == 3, done.stderr[-3000:]  # 3: the job ended, some rows failed
    out = output(tmp_path)
    failed = out.filter(pl.col("llm_status") == "failed")
    assert 0 < failed.height < rows
    assert failed["llm_failure_class"].unique().to_list() == ["invalid_request"]
    assert failed["llm_cost_usd"].fill_null(0).sum() == 0
    stats = failing_server.stats()
    assert stats["requests_billed"] == rows - failed.height, stats
    assert stats["bodies_billed_twice"] == 0, stats


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [with_known_failure(c, "embed") for c in CASES if c.embed_model is not None]
)
def test_maple_embed_runs_to_its_end_where_the_provider_embeds(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    done = run(case, server.url, s3_url, *job_args(case, tmp_path, "embed"))
    ok(done)
    out = output(tmp_path)
    assert out["llm_status"].to_list() == ["succeeded"] * case.rows
    assert out["llm_embedding"].null_count() == 0
    stats = server.stats()
    assert stats["requests_billed"] == case.rows and stats["bodies_billed_twice"] == 0, stats
    assert KEY not in done.stdout + done.stderr
