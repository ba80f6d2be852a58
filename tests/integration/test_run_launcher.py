"""deploy/dagster.yaml's run launcher tells run monitoring whether a run's worker is alive: a run
whose worker process is gone (kill -9, OOM) is reported FAILED, so monitoring fails it and run
retries start it again instead of leaving it STARTED forever."""

import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
from dagster._core.launcher import WorkerStatus

from resources.run_launcher import LocalRunLauncher

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
    instance.dispose()
