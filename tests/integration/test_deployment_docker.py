"""Dagster's Docker run launcher for real: deploy/docker/dagster.yaml on a PostgreSQL instance,
every run of an enrichment in a container of the run image (deploy/docker/build-image.sh), the
storage root on an S3 server and the ledger on PostgreSQL, the containers on the host's network.

A code server (``dagster api grpc``) and the daemon run here; ``dagster job launch`` starts the
enrichment and its sensor asks for the shard runs. The container of a submission run is killed
(``docker kill``) once its step has started: the launcher's own check sees the container exited,
run monitoring fails the run, run retries start it again in a new container, and the job
finishes with every row once and nothing billed twice.

Needs a Docker daemon and the image named by ``MAPLE_TEST_DOCKER_IMAGE`` (built by
deploy/docker/build-image.sh); skips, saying which is missing, without them.
"""

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import docker
import pytest
import yaml

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.storage import Storage
from tests.hosts.harness import BIN, wait_for
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
pytest.importorskip("dagster_docker", reason="install the docker extra: pip install -e '.[docker]'")
pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "s3_endpoint", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
IMAGE_ENV = "MAPLE_TEST_DOCKER_IMAGE"
ROWS, PER_BATCH = 400, 200
CONTAINER_TAG = "docker/container_id"  # the DockerRunLauncher's tag on a run
DEFS = code_location(PER_BATCH, "dg.in_process_executor")  # a run's steps in its container


@pytest.fixture
def image() -> str:
    name = os.environ.get(IMAGE_ENV)
    if not name:
        pytest.skip(f"set {IMAGE_ENV} to an image built by deploy/docker/build-image.sh")
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon to run containers: {exc}")
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        pytest.skip(f"no image {name}: build it with deploy/docker/build-image.sh {name}")
    finally:
        client.close()
    return name


@contextlib.contextmanager
def process(argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def instance_yaml(home: Path, work: Path) -> None:
    """deploy/docker/dagster.yaml, with the test's services passed to the containers, the code
    location's folder mounted at the same path, and faster polls."""
    data = yaml.safe_load((REPO / "deploy" / "docker" / "dagster.yaml").read_text())
    config = data["run_launcher"]["config"]
    config["env_vars"] += [
        "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
        "MAPLE_EMULATOR_URL",
    ]  # fmt: skip
    config["container_kwargs"]["volumes"] = {str(work): {"bind": str(work), "mode": "ro"}}
    data["run_monitoring"]["poll_interval_seconds"] = 3
    data["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    (home / "dagster.yaml").write_text(yaml.safe_dump(data))


def kill_a_submission_container(
    instance: dg.DagsterInstance, timeout: float, story: Callable[[], str]
) -> str:
    """``docker kill`` the container of a submission run once its step has started."""
    deadline = time.monotonic() + timeout
    client = docker.from_env()
    try:
        while time.monotonic() < deadline:
            for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                if not any(k.path[-1] == "submissions" for k in run.asset_selection or ()):
                    continue
                started = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
                if started and CONTAINER_TAG in run.tags:
                    client.containers.get(run.tags[CONTAINER_TAG]).kill()
                    return run.run_id
            time.sleep(0.05)
    finally:
        client.close()
    raise AssertionError(f"no submission step was seen running in a container\n{story()}")


def remove_containers(instance: dg.DagsterInstance) -> None:
    client = docker.from_env()
    try:
        for run in instance.get_runs():
            with contextlib.suppress(KeyError, docker.errors.NotFound):
                client.containers.get(run.tags[CONTAINER_TAG]).remove(force=True)
    finally:
        client.close()


def retried(instance: dg.DagsterInstance, run_id: str) -> bool:
    """A Dagster retry of ``run_id`` succeeded."""
    retries = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": run_id}))
    return any(r.status == dg.DagsterRunStatus.SUCCESS for r in retries)


@pytest.mark.slow  # ~2 min: a container per run
@pytest.mark.timeout(900)
def test_runs_in_containers_finish_a_job_through_a_killed_container(
    tmp_path: Path, pg_url: str, s3_endpoint: str, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "defs.py").write_text(DEFS)
    port = free_port()
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - grpc_server:\n      host: 127.0.0.1\n"
        f"      port: {port}\n      location_name: maple\n"
    )
    code_server = [str(BIN / "dagster"), "api", "grpc", "-f", str(tmp_path / "defs.py"),
                   "-a", "defs", "-h", "127.0.0.1", "-p", str(port)]  # fmt: skip
    daemon = [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"]
    with EmulatorServer(EmulatorConfig(batch_seconds=2.0)) as emulator:
        env = deployment_env(tmp_path, pg_url, s3_endpoint, emulator.url)
        env |= {"MAPLE_RUN_IMAGE": image, "PYTHONPATH": str(REPO)}
        instance_yaml(Path(env["DAGSTER_HOME"]), tmp_path)
        for key, value in env.items():
            if key.startswith(("DAGSTER_", "AWS_", "MAPLE_")):
                monkeypatch.setenv(key, value)
        storage = Storage("s3://maple/root")
        titles = write_source(ROWS)
        instance = dg.DagsterInstance.get()

        def story() -> str:
            daemon_log = (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]
            return runs_story(instance) + "\n" + daemon_log

        try:
            with (
                process(code_server, tmp_path / "code.log", env, tmp_path),
                process(daemon, tmp_path / "daemon.log", env, tmp_path),
            ):
                launch(tmp_path / "workspace.yaml", env)
                killed = kill_a_submission_container(instance, 400, story)
                wait_for("the merge", lambda: merged(storage) is not None, 600, story)
                wait_for("a retry of the killed run", lambda: retried(instance, killed), 300, story)
                stats = emulator.stats()
        finally:
            remove_containers(instance)
    assert_every_row_once(storage, titles, stats, ROWS // PER_BATCH, pg_url)
    killed_run = instance.get_run_by_id(killed)
    assert killed_run is not None and killed_run.status == dg.DagsterRunStatus.FAILURE
    messages = [e.message for e in instance.all_logs(killed)]
    assert any("Container status is exited" in m for m in messages), messages[-3:]
    runs = instance.get_runs()
    assert runs and all(CONTAINER_TAG in r.tags for r in runs)  # every run in a container
