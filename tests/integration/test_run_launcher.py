"""deploy/dagster.yaml's run launcher tells run monitoring whether a run's worker is alive: a run
whose worker process is gone (kill -9, OOM) is reported FAILED, so monitoring fails it and run
retries start it again instead of leaving it STARTED forever."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import orjson

from resources.dagster_private import WorkerStatus
from resources.run_launcher import LAUNCHED_ON_TAG, WORKER_ROOT_TAG, LocalRunLauncher

HOME_YAML = """
run_launcher:
  module: resources.run_launcher
  class: LocalRunLauncher
telemetry:
  enabled: false
"""

RUN_IN_A_CHILD = textwrap.dedent(
    """
    import sys
    import dagster as dg

    @dg.asset
    def numbers() -> int:
        return 1

    instance = dg.DagsterInstance.from_config(sys.argv[1])
    print(dg.materialize([numbers], instance=instance).run_id)
    """
)


def test_a_run_whose_worker_is_gone_is_reported_failed(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text(HOME_YAML)
    child = subprocess.run(
        [sys.executable, "-c", RUN_IN_A_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    gone_run_id = child.stdout.strip().splitlines()[-1]
    instance = dg.DagsterInstance.from_config(str(tmp_path))
    launcher = instance.run_launcher
    assert isinstance(launcher, LocalRunLauncher) and launcher.supports_check_run_worker_health

    @dg.asset
    def here() -> int:
        return 2

    alive_run_id = dg.materialize([here], instance=instance).run_id  # its worker: this process
    gone = launcher.check_run_worker_health(instance.get_run_by_id(gone_run_id))  # type: ignore[arg-type]
    alive = launcher.check_run_worker_health(instance.get_run_by_id(alive_run_id))  # type: ignore[arg-type]
    assert gone.status == WorkerStatus.FAILED and "gone" in (gone.msg or "")
    assert alive.status == WorkerStatus.RUNNING
    # Launched by another host's daemon: a pid of that host says nothing here.
    instance.add_run_tags(gone_run_id, {LAUNCHED_ON_TAG: "another-host"})
    elsewhere = launcher.check_run_worker_health(instance.get_run_by_id(gone_run_id))  # type: ignore[arg-type]
    assert elsewhere.status == WorkerStatus.RUNNING and "another-host" in (elsewhere.msg or "")
    instance.dispose()


MONITORED_YAML = HOME_YAML + "run_monitoring:\n  enabled: true\n"
DIE_IN_A_RUN = textwrap.dedent(
    """
    import os, sys
    import dagster as dg
    from resources.storage import StorageResource

    @dg.asset
    def doomed(storage: StorageResource) -> int:
        os._exit(0)  # the run worker dies mid step: no RUN_FAILURE, no release

    instance = dg.DagsterInstance.from_config(sys.argv[1])
    storage = StorageResource(root=sys.argv[2])
    dg.materialize([doomed], instance=instance, resources={"storage": storage})
    """
)


def test_a_run_worker_beats_under_monitoring_and_is_failed_once_its_beats_stop(
    tmp_path: Path,
) -> None:
    home, root = tmp_path / "home", tmp_path / "root"
    home.mkdir()
    (home / "dagster.yaml").write_text(MONITORED_YAML)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    subprocess.run(
        [sys.executable, "-c", DIE_IN_A_RUN, str(home), str(root)], env=env, check=True, timeout=120
    )
    instance = dg.DagsterInstance.from_config(str(home))
    (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.STARTED and run.tags[WORKER_ROOT_TAG] == str(root)
    (record,) = (root / "_runs" / run.run_id / "worker").glob("*.json")
    launcher = instance.run_launcher
    dead_here = launcher.check_run_worker_health(run)
    assert dead_here.status == WorkerStatus.FAILED and "stopped beating" in (dead_here.msg or "")
    # The same worker on another host, its record freshly written: alive, whatever its pid.
    data = orjson.loads(record.read_bytes())
    record.write_bytes(orjson.dumps({**data, "host": "elsewhere"}))
    assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    old = time.time() - 121  # a TTL (120 s by default) without a beat, by the storage's clock
    os.utime(record, (old, old))
    lost = launcher.check_run_worker_health(run)
    assert lost.status == WorkerStatus.FAILED and "on elsewhere" in (lost.msg or "")
    instance.dispose()


WAIT_IN_A_RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import dagster as dg
    from resources.storage import StorageResource

    @dg.asset
    def waiting(storage: StorageResource) -> int:
        Path(sys.argv[3]).write_text("started")
        time.sleep(600)  # as a celery run's worker waits for a step whose worker host is lost
        return 1

    instance = dg.DagsterInstance.from_config(sys.argv[1])
    storage = StorageResource(root=sys.argv[2])
    dg.materialize([waiting], instance=instance, resources={"storage": storage})
    """
)


def test_the_run_worker_of_a_run_failed_for_a_lost_step_is_ended_on_its_host(
    tmp_path: Path,
) -> None:
    """A run launched on this host whose step stopped beating elsewhere (a lost celery worker)
    is reported FAILED, and its run worker, still waiting here, is ended."""
    home, root, started = tmp_path / "home", tmp_path / "root", tmp_path / "started"
    home.mkdir()
    (home / "dagster.yaml").write_text(MONITORED_YAML)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    worker = subprocess.Popen(
        [sys.executable, "-c", WAIT_IN_A_RUN, str(home), str(root), str(started)], env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert time.monotonic() < deadline and worker.poll() is None
            time.sleep(0.1)
        instance = dg.DagsterInstance.from_config(str(home))
        (run,) = instance.get_runs()
        (record,) = (root / "_runs" / run.run_id / "worker").glob("*.json")
        data = orjson.loads(record.read_bytes())
        record.write_bytes(orjson.dumps({**data, "host": "a-lost-worker"}))
        old = time.time() - 121
        os.utime(record, (old, old))
        launcher = instance.run_launcher
        elsewhere = launcher.check_run_worker_health(run)  # launched on no host known here
        assert elsewhere.status == WorkerStatus.FAILED and worker.poll() is None
        instance.add_run_tags(run.run_id, {LAUNCHED_ON_TAG: socket.gethostname()})
        here = launcher.check_run_worker_health(instance.get_run_by_id(run.run_id))  # type: ignore[arg-type]
        assert here.status == WorkerStatus.FAILED and "was ended" in (here.msg or ""), here.msg
        assert worker.wait(timeout=30) == -signal.SIGKILL
        instance.dispose()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
