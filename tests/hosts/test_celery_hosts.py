"""Dagster's celery executor across hosts, with a worker host lost mid-step.

Three simulated hosts over shared services on loopback: PostgreSQL (the Dagster instance and the
ledger), an S3 server (the storage root and the input table), Redis (Celery's broker and result
backend) and the emulator. Host ``dagster`` runs the Dagster daemon: the enrichment's sensor,
the run queue, and every run's orchestrator (deploy/dagster.yaml's LocalRunLauncher, as a real
deployment's daemon host does). Hosts ``worker-a`` and ``worker-b`` each run one Celery worker
(``dagster-celery worker start -y deploy/celery/celery.yaml``): every step of every run is a
Celery task that either may take. ``dagster job launch`` starts the enrichment of a 2,000-row
table (batch, 200 requests a batch: 10 shards); the sensor asks for the shard runs from there.

Worker A starts alone, so that it takes the first submission step: it freezes there right after
the batch is created at the provider and before Maple records it (``MAPLE_CRASH_AT=after_create``,
``MAPLE_CRASH_MODE=stop``). Worker B starts, and host A is SIGKILLed whole. What a deployment
does then, and what the test holds it to: the step stopped beating its run's lease, so the
daemon's run monitoring fails the run one lease TTL later and ends its run worker (which would
wait for the lost step forever); run retries re-execute the run from the failure; worker B takes
the step, finds the batch A created (Maple's orphan search) instead of creating another, and the
job finishes: every row once in the output, 2,000 requests billed by the emulator, none twice,
one ledger entry per row.
"""

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.leases import pid_alive
from maple_engine.storage.storage import Storage
from resources.run_launcher import worker_pid
from tests.hosts.harness import BIN, Host, hosts, lingering, wait_for
from tests.integration.dagster_processes import free_port
from tests.integration.deployed_job import (
    assert_every_row_once,
    code_location,
    launch,
    merged,
    runs_story,
    write_source,
)
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.integration.test_deployment_postgres import deployment_env, s3_endpoint

pytest.importorskip("dagster_postgres", reason="install the postgres extra")
pytest.importorskip("dagster_celery", reason="install the celery extra: pip install -e '.[celery]'")
pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "s3_endpoint", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
CELERY_YAML = REPO / "deploy" / "celery" / "celery.yaml"
ROWS, PER_BATCH, TTL = 2000, 200, 10.0
MONITORING_POLL_S = 3  # deploy/dagster.yaml polls every 30 s; the test need not wait that long
# deploy/celery/celery.yaml: the workers read the same file (dagster-celery worker start -y).
DEFS = code_location(
    PER_BATCH,
    "celery_executor.configured(celery)",
    f"""
    from pathlib import Path

    import yaml
    from dagster_celery import celery_executor

    celery = yaml.safe_load(Path({str(CELERY_YAML)!r}).read_text())["execution"]["config"]
    """,
)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A throwaway Redis server on loopback (Debian's redis-server), no persistence."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("needs Redis: apt-get install redis-server")
    port = free_port()
    proc = subprocess.Popen(
        [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    cli = [shutil.which("redis-cli") or "redis-cli", "-p", str(port), "ping"]
    deadline = time.monotonic() + 20
    while subprocess.run(cli, capture_output=True, text=True, check=False).stdout.strip() != "PONG":
        assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
        time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def host_env(home: Path, pg: str, endpoint: str, emulator: str, redis: str) -> dict[str, str]:
    """A host's environment: deploy/dagster.yaml as its instance (polling faster), the shared
    services, Celery's broker and backend (deploy/celery/celery.yaml reads them), a short lease
    TTL."""
    home.mkdir(parents=True)
    env = deployment_env(home, pg, endpoint, emulator)
    config = Path(env["DAGSTER_HOME"]) / "dagster.yaml"
    data = yaml.safe_load(config.read_text())
    data["run_monitoring"]["poll_interval_seconds"] = MONITORING_POLL_S
    data["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    config.write_text(yaml.safe_dump(data))
    return env | {
        "CELERY_BROKER_URL": f"{redis}/0", "CELERY_RESULT_BACKEND": f"{redis}/1",
        "MAPLE_LEASE_TTL_S": str(TTL),
        "PYTHONPATH": str(REPO), "T_MARK": str(home),
    }  # fmt: skip


def worker(host: Host) -> None:
    """One Celery worker on ``host``, one step at a time, named after the host."""
    argv = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
            "-y", str(CELERY_YAML), "-n", "maple", "--", "--concurrency=1"]  # fmt: skip
    host.start(argv, "worker")


def frozen(host: Host) -> int | None:
    """The process of ``host`` that is stopped (a step frozen at its crash point), if any."""
    for pid in host.pids():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "T":
            return pid
    return None


def run_of(instance: dg.DagsterInstance, pid: int) -> str:
    """The started run one of whose steps process ``pid`` executes (its STEP_START's pid)."""
    for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START):
            if event.dagster_event is not None and event.dagster_event.pid == pid:
                return run.run_id
    raise AssertionError(f"no started run has a step in process {pid}:\n{runs_story(instance)}")


def took_steps(instance: dg.DagsterInstance, host: str) -> int:
    """How many steps a Celery worker on ``host`` took (each task's engine event names its
    worker: ``maple@<host>``)."""
    taken = 0
    for run in instance.get_runs():
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            data = event.dagster_event.engine_event_data if event.dagster_event else None
            name = data.metadata.get("Celery worker") if data else None
            taken += name is not None and name.value == f"maple@{host}"
    return taken


@pytest.mark.slow  # ~3 min: a daemon, two Celery workers, a lease TTL, 10 shards
@pytest.mark.timeout(900)
def test_celery_workers_on_two_hosts_finish_a_job_through_a_lost_worker(
    tmp_path: Path,
    pg_url: str,
    s3_endpoint: str,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "defs.py").write_text(DEFS)
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: defs.py\n      location_name: maple\n"
    )
    with EmulatorServer(EmulatorConfig(batch_seconds=2.0)) as emulator:
        envs = {
            name: host_env(tmp_path / name, pg_url, s3_endpoint, emulator.url, redis_url)
            for name in ("dagster", "worker-a", "worker-b")
        }
        for key, value in envs["dagster"].items():
            if key.startswith(("DAGSTER_", "AWS_", "MAPLE_")):
                monkeypatch.setenv(key, value)
        storage = Storage("s3://maple/root")
        titles = write_source(ROWS)
        instance = dg.DagsterInstance.get()
        with hosts(tmp_path, envs["dagster"], "dagster", "worker-a", "worker-b") as (d, a, b):
            a.env = envs["worker-a"] | {
                "MAPLE_CRASH_AT": "after_create",
                "MAPLE_CRASH_MODE": "stop",
            }
            b.env = envs["worker-b"]
            d.daemon(tmp_path / "workspace.yaml")
            worker(a)
            launch(tmp_path / "workspace.yaml", d.env, on=d.command)

            def story() -> str:
                return "\n".join(
                    [runs_story(instance), d.log("daemon")[-3000:], a.log("worker")[-2000:],
                     b.log("worker")[-2000:]]
                )  # fmt: skip

            wait_for("a step frozen on worker-a", lambda: frozen(a) is not None, 400, story)
            killed_run = run_of(instance, frozen(a) or 0)
            worker(b)
            lost = a.kill()
            done = wait_for("the merge", lambda: merged(storage) is not None, 600, story)
            stats = emulator.stats()
            # The failed run's orchestrator waited on a step no worker will ever answer; the
            # daemon's run monitoring ends it with the run (resources.run_launcher).
            orchestrator = worker_pid(instance, killed_run)
            assert orchestrator is not None
            wait_for("the failed run's orchestrator to end", lambda: not pid_alive(orchestrator),
                     30, story)  # fmt: skip
    record = instance.get_run_record_by_id(killed_run)
    failed = record.end_time if record is not None and record.end_time else float("nan")
    print(f"\nworker-a lost: its run failed by run monitoring {failed - lost:.1f} s later "
          f"(lease TTL {TTL:g} s), the job merged {done - lost:.1f} s later")  # fmt: skip
    assert_every_row_once(storage, titles, stats, ROWS // PER_BATCH, pg_url)
    assert instance.get_run_by_id(killed_run).status == dg.DagsterRunStatus.FAILURE
    retries = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": killed_run}))
    assert any(r.status == dg.DagsterRunStatus.SUCCESS for r in retries), runs_story(instance)
    assert took_steps(instance, "worker-a") >= 1 and took_steps(instance, "worker-b") >= 1
    assert lingering(str(tmp_path)) == [], "processes left behind"
