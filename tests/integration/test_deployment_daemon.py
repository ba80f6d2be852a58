"""A real multi-process Dagster deployment on this machine.

``dagster dev`` (webserver, daemon and their code servers as separate processes) on a Dagster
instance from deploy/dagster.yaml on a throwaway PostgreSQL server, the storage root on moto's
S3 server, the ledger on PostgreSQL, the emulator in this process. A run of both enrichments'
``input_shards`` is launched over GraphQL; the daemon's sensors carry both to ``merged`` at
once. Meanwhile the run worker of a shard run (submit or collect) and its step process are
killed with SIGKILL mid step: run monitoring notices (deploy/dagster.yaml's LocalRunLauncher
checks the worker's pid), fails the run, the daemon retries it (run_retries), and the jobs still
finish with every batch created once and nothing billed twice (the emulator's counters).
"""

import contextlib
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
import sqlalchemy as sa

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.storage import Storage
from resources.run_launcher import worker_pid
from tests.integration.dagster_processes import dagster_dev, graphql, wait_ready
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.integration.test_deployment_postgres import deployment_env, s3_endpoint

pytest.importorskip("dagster_postgres", reason="install the postgres extra")
pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "s3_endpoint", "server_url"]  # fixtures
DAGSTER = str(Path(sys.executable).parent / "dagster")
ROWS, PER_BATCH = 5, 5  # one shard per enrichment: fewer runs, each ~2 CPU-s
DEFS = textwrap.dedent(
    """
    import os
    import dagster as dg
    from maple_assets.factory import enrichment
    from maple_assets.wiring import maple_resources

    jobs = [
        enrichment(name=name, source=os.environ["T_TABLE"], prompt=name + " {title}",
                   model="gpt-4o-mini", provider="emulator", max_requests_per_batch=5,
                   poll_interval_s=1)
        for name in ("alpha", "beta")
    ]
    defs = dg.Definitions(
        assets=[a for j in jobs for a in j.assets],
        asset_checks=[c for j in jobs for c in j.checks],
        sensors=[s for j in jobs for s in j.sensors],
        resources=maple_resources(jobs),
    )
    """
)
LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


SHARD_STEPS = ("submissions", "raw_responses")  # a shard's steps: submit, collect


@pytest.fixture
def deployment(
    tmp_path: Path, pg_url: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_parquet(table)
    (tmp_path / "defs.py").write_text(DEFS)
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: defs.py\n      location_name: maple\n"
    )
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as emulator:
        env = deployment_env(tmp_path, pg_url, s3_endpoint, emulator.url) | {"T_TABLE": str(table)}
        for key, value in env.items():
            if key.startswith(("DAGSTER_", "AWS_", "MAPLE_")):
                monkeypatch.setenv(key, value)
        with dagster_dev(tmp_path, env) as port:
            yield {"url": f"http://127.0.0.1:{port}", "emulator": emulator, "dir": tmp_path}


def launch_input_shards(url: str) -> str:
    params = {
        "selector": {
            "repositoryLocationName": "maple",
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": [n, "input_shards"]} for n in ("alpha", "beta")],
        },
        "runConfigData": {},
    }
    got = graphql(url, LAUNCH, {"params": params})["data"]["launchRun"]
    assert got["__typename"] == "LaunchRunSuccess", got
    return str(got["run"]["runId"])


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every process under it, as a lost pod or an OOM-killed container
    loses them: the run worker and its step processes. (Killing the worker alone lets an orphaned
    step process finish the step; the run is then failed with nothing left to retry.)"""
    os.kill(pid, signal.SIGSTOP)  # it starts no new child while its tree is listed
    tree = [pid]
    for parent in tree:
        tree.extend(children(parent))
    for each in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def kill_a_shard_run_worker(instance: dg.DagsterInstance, timeout: float) -> str:
    """SIGKILL the run worker of a shard run (submit or collect), and its step processes, once
    its step has started: the process the code server started for the run, whose pid it reports
    in its first event."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
            if not any(k.path[-1] in SHARD_STEPS for k in run.asset_selection or ()):
                continue
            logs = instance.all_logs(run.run_id)
            pid = worker_pid(instance, run.run_id)
            if pid and any(e.dagster_event.is_step_start for e in logs if e.dagster_event):
                kill_tree(pid)
                return run.run_id
        time.sleep(0.05)
    seen = []
    for run in instance.get_runs():
        logs = instance.all_logs(run.run_id)
        seen.append((run.status, run.asset_selection, [e.user_message[:80] for e in logs][:12]))
    raise AssertionError(f"no shard step was seen running: {seen}")


def run_story(instance: dg.DagsterInstance, killed: str, work: Path) -> str:
    """What became of the killed run and its retries: statuses and last events first."""
    lines = []
    for run in instance.get_runs():
        if run.run_id != killed and run.tags.get("dagster/parent_run_id") != killed:
            continue
        events = [e.user_message[:100] for e in instance.all_logs(run.run_id)][-8:]
        lines.append(f"{run.run_id[:8]} {run.status} tags={dict(run.tags)} last={events}")
    return "\n".join(lines) + "\n" + (work / "dev.log").read_text()[-3000:]


def redone(instance: dg.DagsterInstance, killed: str) -> bool:
    """A Dagster retry of the killed run succeeded, or a run the sensor asked for again."""
    retries = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": killed}))
    if any(r.status == dg.DagsterRunStatus.SUCCESS for r in retries):
        return True
    run = instance.get_run_by_id(killed)
    key = run.tags.get("dagster/run_key", "") if run else ""
    again = [r for r in instance.get_runs() if r.tags.get("dagster/run_key", "").startswith(key)]
    return any(
        r.status == dg.DagsterRunStatus.SUCCESS and ":after-" in r.tags["dagster/run_key"]
        for r in again
    )


def queue_story(work: Path) -> str:
    """The shared queue's rows and the log's tail: why a job still waits."""
    engine = sa.create_engine(os.environ["MAPLE_COST_DB"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM queue_slots")).all()
    finally:
        engine.dispose()
    runs = [
        f"{r.run_id[:8]} {r.status} {sorted(k.to_user_string() for k in r.asset_selection or ())} "
        f"{ {k: v for k, v in r.tags.items() if k.startswith('dagster/')} }"
        for r in dg.DagsterInstance.get().get_runs()
    ]
    return (
        "queue_slots:\n"
        + "\n".join(map(str, rows))
        + "\nruns:\n"
        + "\n".join(runs)
        + "\n"
        + (work / "dev.log").read_text()[-3000:]
    )


def merged(root: Storage, job: str) -> dict[str, Any] | None:
    key = f"{job}/state/merged.json"
    return dict(root.read_json(key)) if root.exists(key) else None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_daemon_carries_two_enrichments_to_merged_through_a_killed_run_worker(
    deployment: dict[str, Any],
) -> None:
    url, emulator, work = deployment["url"], deployment["emulator"], deployment["dir"]
    wait_ready(url, work / "dev.log")
    launch_input_shards(url)
    instance = dg.DagsterInstance.get()
    killed = kill_a_shard_run_worker(instance, timeout=400)  # as soon as one is seen
    storage = Storage(os.environ["MAPLE_STORAGE"])
    deadline = time.monotonic() + 600  # minutes when the machine is loaded
    while not all(merged(storage, j) for j in ("alpha", "beta")):
        assert time.monotonic() < deadline, queue_story(work)
        time.sleep(1.0)
    for job in ("alpha", "beta"):
        info = merged(storage, job)
        assert info is not None and info["rows"] == ROWS
        assert info["totals"]["succeeded"] == ROWS, info
    stats = emulator.stats()
    assert stats["bodies_billed_twice"] == 0, stats
    assert stats["requests_billed"] == 2 * ROWS, stats
    assert stats["batches_created"] == 2 * ROWS // PER_BATCH, stats
    # Run monitoring saw the worker gone and failed the run; run retries re-executed it, or,
    # where Dagster made no retry, the sensor asked for it again under a new run key
    # (maple_assets.graph.revive). The jobs may finish first: the other enrichment's runs, or a
    # sensor-requested collect, go on.
    deadline = time.monotonic() + 300
    while not redone(instance, killed):
        assert time.monotonic() < deadline, run_story(instance, killed, work)
        time.sleep(1.0)
    assert instance.get_run_by_id(killed).status == dg.DagsterRunStatus.FAILURE
    assert emulator.stats()["bodies_billed_twice"] == 0
