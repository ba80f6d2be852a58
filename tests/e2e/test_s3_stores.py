"""``maple enrich`` on S3 stores that lack what leases and reads rely on: SeaweedFS behind a
proxy that drops ``If-None-Match`` (it overwrites, as rclone's ``serve s3`` does) or ``Range``
(it answers every ranged GET 200 with the whole object). The job is refused before anything is
spent, exit 2, in one line naming the store; or, where the ledger is PostgreSQL, its database
keeps the exclusive creates and the job runs, two drivers at once paying once."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.conftest import BUCKET
from tests.e2e.cli import clean_env
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.s3_proxy import dropping
from tests.seaweedfs import SeaweedFS

__all__ = ["pg_url", "server_url"]  # fixtures
ROWS = 6
SPENT = ("files_uploaded", "batches_created", "requests_billed")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(path)
    return path


@pytest.fixture
def overwriting(open_seaweedfs: SeaweedFS) -> Iterator[str]:
    """The endpoint of a store that ignores ``If-None-Match``."""
    with dropping(open_seaweedfs.endpoint, "If-None-Match") as proxy:
        yield proxy.url


@pytest.fixture
def no_ranges(open_seaweedfs: SeaweedFS) -> Iterator[str]:
    """The endpoint of a store that ignores ``Range``."""
    with dropping(open_seaweedfs.endpoint, "Range") as proxy:
        yield proxy.url


def enrich(
    source: str, root: str, endpoint: str, server: EmulatorServer, tmp_path: Path, **env: str
) -> subprocess.Popen[str]:
    """``maple enrich`` of ``source`` with its state under ``root`` on the S3 store at
    ``endpoint``, started (its output in ``tmp_path``), as `tests.e2e.cli.maple` runs it."""
    args = [
        "enrich", source, "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", root, "--job", "shared",
        "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", "2",
        "--poll-interval", "0.1", "--quiet", "--wait",
    ]  # fmt: skip
    aws = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "maple_assets.cli", *args],
        env={**clean_env(), "MAPLE_EMULATOR_URL": server.url, **aws, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def refused(result: subprocess.CompletedProcess[str]) -> str:
    """The one line of a job refused at start-up (exit 2)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_a_store_that_overwrites_is_refused_before_anything_is_spent(
    overwriting: str, table: Path, tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    root = f"s3://{BUCKET}/overwrites"
    line = refused(finish(enrich(str(table), root, overwriting, emulator_server, tmp_path)))
    assert line.startswith(f"error: The storage root '{root}': the S3 store {overwriting} ")
    assert "does not honour conditional writes (a second PutObject with If-None-Match" in line
    assert "could both believe they hold its lease" in line
    assert "(AWS S3, SeaweedFS or MinIO), or set MAPLE_COST_DB to a PostgreSQL ledger" in line
    stats = emulator_server.stats()
    assert [stats[k] for k in SPENT] == [0, 0, 0]


def test_a_store_without_range_reads_is_refused_naming_it(
    no_ranges: str, table: Path, tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    root = f"s3://{BUCKET}/no-ranges"
    line = refused(finish(enrich(str(table), root, no_ranges, emulator_server, tmp_path)))
    assert line.startswith(f"error: The storage root '{root}': the S3 store {no_ranges} ")
    assert "does not honour range reads (a GET of bytes 6-10 answered 200" in line
    assert "conditional writes" not in line
    stats = emulator_server.stats()
    assert [stats[k] for k in SPENT] == [0, 0, 0]


def test_an_input_on_a_store_without_range_reads_names_the_store_not_the_file(
    open_seaweedfs: SeaweedFS, no_ranges: str, tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    import boto3

    source = f"s3://{BUCKET}/inputs/items.csv"
    client = boto3.client(
        "s3",
        endpoint_url=open_seaweedfs.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.put_object(Bucket=BUCKET, Key="inputs/items.csv", Body=b"title\nthing 1\nthing 2\n")
    local_root = str(tmp_path / "store")
    line = refused(finish(enrich(source, local_root, no_ranges, emulator_server, tmp_path)))
    assert line.startswith(f"error: The input '{source}': the S3 store {no_ranges} ")
    assert "does not honour range reads" in line and "Give a readable" not in line
    stats = emulator_server.stats()
    assert [stats[k] for k in SPENT] == [0, 0, 0]


@pytest.mark.postgres
@pytest.mark.slow  # ~50 s: two whole jobs on S3 with a PostgreSQL ledger
def test_the_ledgers_postgresql_keeps_the_creates_the_store_cannot(
    overwriting: str, pg_url: str, table: Path, tmp_path: Path
) -> None:
    root = f"s3://{BUCKET}/kept-{tmp_path.name}"
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5)) as server:
        procs = [
            enrich(str(table), root, overwriting, server, tmp_path, MAPLE_COST_DB=pg_url)
            for _ in range(2)
        ]
        results = [finish(p) for p in procs]
        stats = server.stats()
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        kept = [line for line in result.stderr.splitlines() if "conditional writes" in line]
        assert len(kept) == 1, result.stderr[-3000:]  # said once, not again by each run
        assert kept[0].startswith(f"The S3 store {overwriting} does not honour conditional ")
        assert "are kept in the ledger's PostgreSQL database postgresql+psycopg2://" in kept[0]
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == ROWS, stats
    assert stats["batches_created"] == ROWS // 2, stats
    assert pl.read_parquet(tmp_path / "out.parquet")["llm_status"].to_list() == ["succeeded"] * ROWS
