"""Dagster's default run launcher, plus the run-worker health check run monitoring needs.

With ``dg.DefaultRunLauncher`` each run is a subprocess of the code server, and Dagster cannot tell
whether that process is alive (its ``supports_check_run_worker_health`` is False): a run worker
killed with ``kill -9``, by the OOM killer or with its whole host leaves its run STARTED forever,
so run retries never start and the shard never finishes. This launcher answers run monitoring's
health check in two ways:

- **Beats.** Where run monitoring is on, a run worker with Maple's storage resource holds the
  lease ``_runs/<run id>/worker`` under the storage root while it runs (it beats every quarter
  of ``MAPLE_LEASE_TTL_S``) and tags its run ``maple/worker_lease_root``. A run whose worker
  stopped beating for a TTL (judged on the storage's clock) is FAILED, whichever host the
  worker ran on and whichever host's daemon asks: a lost host's runs are failed one TTL plus
  one monitoring poll after the loss.
- **Pids**, for runs without beats: the run worker reports its pid with every event it writes
  (the run's RUN_START gives it); when that process is gone (or a zombie) here, the check says
  FAILED. Only sound where the daemon and the run workers share a machine.

Run monitoring then fails the run, and run retries launch it again (Maple's steps are
idempotent: the retry pays for nothing twice). The K8s and ECS launchers have their own checks.
"""

import contextlib
import socket

import dagster as dg

from maple_engine.storage.layout import run_worker_folder
from maple_engine.storage.leases import Lease, pid_alive
from maple_engine.storage.storage import Storage
from resources.dagster_private import CheckRunHealthResult, WorkerStatus

WORKER_ROOT_TAG = "maple/worker_lease_root"


class LocalRunLauncher(dg.DefaultRunLauncher):
    """``dg.DefaultRunLauncher`` whose run workers run monitoring can check."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        root = run.tags.get(WORKER_ROOT_TAG)
        if root:
            lease = Lease(Storage(root), run_worker_folder(run.run_id), what="")
            _, holder = lease.current()
            if holder is not None and not holder.released:
                if not holder.stale(lease.ttl_s):
                    return CheckRunHealthResult(WorkerStatus.RUNNING, f"{holder.describe()} beats")
                return CheckRunHealthResult(
                    WorkerStatus.FAILED,
                    f"run worker {holder.describe()} stopped beating {holder.age:.0f} s ago "
                    "(its process or host is gone)",
                )
            if holder is None or holder.host != socket.gethostname():
                return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker between steps")
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


def beat_while_running(
    instance: dg.DagsterInstance | None, run_id: str | None, storage: Storage
) -> contextlib.ExitStack | None:
    """In a run worker under run monitoring with this launcher: hold the run's worker lease
    (beating) until the returned stack is closed, and tag the run with the storage root that
    holds it. None where nothing watches (no instance, monitoring off, another launcher) or
    another step process of the run beats already."""
    if instance is None or run_id is None or not instance.run_monitoring_enabled:
        return None
    if not isinstance(instance.run_launcher, LocalRunLauncher):
        return None
    lease = Lease(storage, run_worker_folder(run_id), what=f"run worker of {run_id}")
    if not lease.acquire():
        return None
    stack = contextlib.ExitStack()
    stack.enter_context(lease.hold())
    instance.add_run_tags(run_id, {WORKER_ROOT_TAG: storage.root})
    return stack
