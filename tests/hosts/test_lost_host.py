"""A lost host: every process of host A (its ``maple enrich`` driver with the runs it executes,
its Dagster daemon and that daemon's code server) SIGKILLed mid-job. Host B, with a daemon of
its own and ``maple enrich --wait`` on the same job, takes the job over once A's driver lease
lapses and finishes it: every row once, nothing billed twice (the emulator's counters), one
ledger entry per row. B's daemon's run monitoring fails A's killed run: its worker stopped
beating (deploy/dagster.yaml's LocalRunLauncher, judged on the storage's clock, not on a pid
that means nothing on B). PostgreSQL (Dagster's instance and the ledger), moto's S3 server (the
storage root) and the emulator are shared on loopback."""

import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage
from resources.run_launcher import WORKER_ROOT_TAG
from tests.hosts.harness import BIN, Host, hosts, lingering, wait_for
from tests.integration.deployed_job import ledger_requests
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.integration.test_deployment_postgres import deployment_env, s3_endpoint

pytest.importorskip("dagster_postgres", reason="install the postgres extra")
pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "s3_endpoint", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
ROWS, PER_BATCH, TTL = 20, 5, 10.0
JOB = "lost"
MONITORING_POLL_S = 3  # deploy/dagster.yaml polls every 30 s; the test need not wait that long


def host_env(home: Path, pg: str, endpoint: str, emulator: str) -> dict[str, str]:
    """A host's environment: deploy/dagster.yaml as its instance (polling faster), the shared
    services, a short lease TTL."""
    home.mkdir(parents=True)
    env = deployment_env(home, pg, endpoint, emulator)
    config = Path(env["DAGSTER_HOME"]) / "dagster.yaml"
    data = yaml.safe_load(config.read_text())
    data["run_monitoring"]["poll_interval_seconds"] = MONITORING_POLL_S
    config.write_text(yaml.safe_dump(data))
    (home / "defs.py").write_text("import dagster as dg\n\ndefs = dg.Definitions()\n")
    (home / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: defs.py\n      location_name: ops\n"
    )
    return env | {"PYTHONPATH": str(REPO), "MAPLE_LEASE_TTL_S": str(TTL), "T_MARK": str(home)}


def enrich(table: Path, *extra: str) -> list[str]:
    return [
        str(BIN / "maple"), "enrich", str(table), "--prompt", "Name {title}", "--model",
        "gpt-4o-mini", "--provider", "emulator", "--job", JOB, "--output",
        "s3://maple/out.parquet", "--max-requests-per-batch", str(PER_BATCH),
        "--poll-interval", "0.5", "--quiet", *extra,
    ]  # fmt: skip


def started_run_on(instance: dg.DagsterInstance, host: Host, timeout: float) -> dg.DagsterRun:
    """A run of the job that host's driver is executing right now, its worker beating."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
            if WORKER_ROOT_TAG in run.tags:
                return run
        time.sleep(0.05)
    raise AssertionError(f"no run seen running on {host.name}:\n{host.log('enrich')[-3000:]}")


@pytest.mark.slow  # ~2 min: two daemons, two drivers, a lease TTL
@pytest.mark.timeout(600)
def test_a_lost_host_s_job_is_finished_by_another_and_its_run_failed(
    tmp_path: Path, pg_url: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_parquet(table)
    with EmulatorServer(EmulatorConfig(batch_seconds=6.0)) as emulator:
        env_a = host_env(tmp_path / "host-a", pg_url, s3_endpoint, emulator.url)
        env_b = host_env(tmp_path / "host-b", pg_url, s3_endpoint, emulator.url)
        for key, value in env_a.items():
            if key.startswith(("DAGSTER_", "AWS_", "MAPLE_")):
                monkeypatch.setenv(key, value)
        instance = dg.DagsterInstance.get()
        storage = Storage("s3://maple/root")
        driver = JobLayout(JOB).driver
        with hosts(tmp_path, env_a, "host-a", "host-b") as (a, b):
            b.env = env_b
            a.daemon(tmp_path / "host-a" / "workspace.yaml")
            b.daemon(tmp_path / "host-b" / "workspace.yaml")
            a.start(enrich(table), log="enrich")
            wait_for("A's first batch", lambda: emulator.stats()["batches_created"] >= 1, 300,
                     lambda: a.log("enrich") + a.log("daemon")[-3000:])  # fmt: skip
            killed = started_run_on(instance, a, timeout=120)
            lost = a.kill()
            survivor = b.start(enrich(table, "--wait"), log="enrich")
            took = wait_for(
                "B's takeover",
                lambda: len(storage.list_keys(driver)) >= 2,
                120,
                lambda: b.log("enrich"),
            )
            wait_for(
                "B's finish", lambda: survivor.poll() is not None, 300, lambda: b.log("enrich")
            )
            wait_for(
                "run monitoring failing A's run",
                lambda: (
                    instance.get_run_by_id(killed.run_id).status  # type: ignore[union-attr]
                    == dg.DagsterRunStatus.FAILURE
                ),
                120,
                lambda: b.log("daemon")[-3000:],
            )
            stats = emulator.stats()
        assert survivor.returncode == 0, b.log("enrich")[-3000:]
    record = instance.get_run_record_by_id(killed.run_id)
    failed = record.end_time if record is not None and record.end_time else float("nan")
    print(f"\nhost A lost at {lost:.1f}: B took the job over {took - lost:.1f} s later "
          f"(lease TTL {TTL:g} s); A's run {killed.run_id[:8]} failed by run monitoring "
          f"{failed - lost:.1f} s after the loss")  # fmt: skip
    assert f"succeeded      {ROWS}" in b.log("enrich")
    assert stats["bodies_billed_twice"] == 0, stats
    assert stats["requests_billed"] == ROWS, stats
    assert stats["batches_created"] == ROWS // PER_BATCH, stats
    out = pl.read_parquet("s3://maple/out.parquet", storage_options=storage.s3.polars_options())
    assert sorted(out["title"].to_list()) == sorted(f"item {i}" for i in range(ROWS))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert ledger_requests(pg_url, JOB) == ROWS
    messages = [e.message for e in instance.all_logs(killed.run_id)]
    assert any("on host-a" in m and "stopped beating" in m for m in messages), messages[-3:]
    assert TTL - TTL / 4 - 1.5 <= took - lost <= TTL + 15, took - lost
    assert lingering(str(tmp_path)) == [], "processes left behind"
