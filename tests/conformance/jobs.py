"""A provider case's job as the suite runs it: its arguments, its run through ``maple``, and
what the emulator, the output and the ledger say afterwards."""

import json
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from maple_assets.cli.commands import main
from maple_engine.providers.registry import capabilities
from tests.conformance.cases import BUCKET, PRICES, Case
from tests.conformance.conftest import AWS_KEYS
from tests.e2e.cli import maple

JOB = "conformance"


def is_batch(case: Case) -> bool:
    return capabilities(case.provider).mode == "batch"


def storage(case: Case, work: Path) -> str:
    return f"s3://{BUCKET}/{work.name}" if case.on_s3 else str(work / "store")


def job_args(
    case: Case, work: Path, command: str = "enrich", *extra: str, rows: int | None = None
) -> list[str]:
    """``maple enrich`` (chat) or ``maple embed`` of the case's rows (or ``rows``)."""
    table = work / "items.parquet"
    count = rows or case.rows
    pl.DataFrame({"title": [f"thing {i}" for i in range(count)]}).write_parquet(table)
    if command == "embed":
        assert case.embed_model is not None
        what = ["--text", "{title}", "--model", case.embed_model, *case.embed_flags]
    else:
        what = ["--prompt", "About {title}", "--model", case.model]
    return [
        command, str(table), *what, "--provider", case.provider, "--storage", storage(case, work),
        "--job", JOB, "--output", str(work / "out.parquet"), "--max-requests-per-batch",
        str(case.batch_rows), "--poll-interval", "0.1", "--quiet", *extra,
    ]  # fmt: skip


def environment(case: Case, url: str, s3_url: str) -> dict[str, str]:
    """The case's variables at ``url``, the suite's price file, and moto's S3 for a case on
    S3."""
    s3 = {**AWS_KEYS, "AWS_ENDPOINT_URL_S3": s3_url} if case.on_s3 else {}
    return {**s3, "MAPLE_PRICES": str(PRICES), **case.env(url)}


def run(case: Case, url: str, s3_url: str, *args: str, **env: str) -> Any:
    """``maple ARGS`` with none of the caller's provider settings, the case's at ``url``."""
    return maple(*args, clean=True, **(environment(case, url, s3_url) | env))


def output(work: Path) -> pl.DataFrame:
    return pl.read_parquet(work / "out.parquet")


def booked(case: Case, work: Path, s3_url: str) -> list[dict[str, Any]]:
    """``maple costs --by job`` of the case's storage root (in-process: it reads the ledger)."""
    args = ["costs", "--storage", storage(case, work), "--by", "job", "--format", "json"]
    env = {**AWS_KEYS, "AWS_ENDPOINT_URL_S3": s3_url} if case.on_s3 else {}
    shown = CliRunner().invoke(main, args, env={"MAPLE_COST_DB": None, **env})
    assert shown.exit_code == 0, shown.output
    return list(json.loads(shown.stdout))


def ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def with_known_failure(case: Case, promise: str, cheap: bool = False) -> Any:
    """The case as a test parameter of ``promise``: a strict xfail where ``known_failures``
    names the promise; a ``cheap`` promise runs in the default pass unless the case runs the
    code of another name (``same_code_as``), which the default pass holds to it."""
    reason = case.known_failures.get(promise)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    if cheap and case.same_code_as is not None:
        marks.append(pytest.mark.slow)
    return pytest.param(case, id=case.id, marks=marks)
