"""The deployment's shared services for real: a Dagster instance from deploy/dagster.yaml on a
throwaway PostgreSQL server (dagster-postgres with the project's pins), the storage root on
moto's S3 server, the ledger on PostgreSQL, and two ``maple enrich`` processes driving one job
at once against one emulator: one batch per shard, nothing billed twice, runs in PostgreSQL."""

import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import dagster as dg
import polars as pl
import pytest
import sqlalchemy as sa
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.integration.test_costs_postgres import pg_url, server_url

pytest.importorskip(
    "dagster_postgres", reason="install the postgres extra: pip install -e '.[postgres]'"
)
pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
MAPLE = str(Path(sys.executable).parent / "maple")
ROWS, PER_BATCH = 20, 5


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="t", aws_secret_access_key="t",
        region_name="us-east-1",
    )  # fmt: skip
    client.create_bucket(Bucket="maple")
    yield endpoint
    server.stop()


def deployment_env(tmp_path: Path, pg: str, endpoint: str, emulator: str) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")
    url = sa.make_url(pg)
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": str(url.host), "DAGSTER_PG_PORT": str(url.port),
        "DAGSTER_PG_DB": str(url.database), "DAGSTER_PG_USER": str(url.username),
        "DAGSTER_PG_PASSWORD": url.password or "",
        "MAPLE_COST_DB": pg, "MAPLE_STORAGE": "s3://maple/root",
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1", "MAPLE_EMULATOR_URL": emulator,
    }  # fmt: skip


@pytest.mark.slow  # ~35 s: runs in CI's slow pass (pytest -m slow)
def test_two_drivers_on_a_postgres_instance_with_s3_and_a_postgres_ledger(
    tmp_path: Path, pg_url: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_parquet(table)
    cmd = [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--job", "deployed", "--output", "s3://maple/out.parquet",
        "--max-requests-per-batch", str(PER_BATCH), "--poll-interval", "0.2", "--quiet", "--wait",
    ]  # fmt: skip
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5)) as server:
        env = deployment_env(tmp_path, pg_url, s3_endpoint, server.url)
        procs = [
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=240) for p in procs]
        results = [(p.returncode, *o) for p, o in zip(procs, outputs, strict=True)]
        stats = server.stats()
    for code, out, err in results:
        assert code == 0, err[-3000:]
        assert f"succeeded      {ROWS}" in out
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == ROWS
    assert stats["batches_created"] == ROWS // PER_BATCH
    for key in [k for k in env if k.startswith("DAGSTER_PG")]:
        monkeypatch.setenv(key, env[key])
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs()
        assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            billed = conn.exec_driver_sql(
                "SELECT sum(requests) FROM attempt_costs WHERE job = 'deployed'"
            ).scalar()
        assert billed == ROWS
    finally:
        engine.dispose()
