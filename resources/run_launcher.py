"""Dagster's default run launcher, plus the run-worker health check run monitoring needs.

With ``DefaultRunLauncher`` each run is a subprocess of the code server, and Dagster cannot tell
whether that process is alive: a run worker killed with ``kill -9`` (or by the OOM killer)
leaves its run STARTED forever, so run retries never start and the shard never finishes. This
launcher answers run monitoring's health check from the process table: the run worker reports
its pid with every event it writes (the run's RUN_START gives it); when that process is
gone (or a zombie), the check says FAILED, run monitoring fails the run, and run retries
launch it again (Maple's steps are idempotent: the retry pays for nothing twice).

Use it where the daemon and the code server share a machine, as ``deploy/dagster.yaml`` does;
the K8s and ECS launchers have their own health checks.
"""

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus

from maple_engine.storage.leases import pid_alive


class LocalRunLauncher(DefaultRunLauncher):
    """``DefaultRunLauncher`` whose run workers run monitoring can check."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        pid = worker_pid(self._instance, run.run_id)
        if pid is None:  # not reported yet: run monitoring's start timeout covers this case
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker not started yet")
        if pid_alive(pid):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker pid {pid} is alive")
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"run worker pid {pid} is gone (killed or crashed)"
        )


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid: the process that wrote the run's RUN_START event (every Dagster
    event records the pid of the process that wrote it)."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.RUN_START, limit=1
    ).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None else None
