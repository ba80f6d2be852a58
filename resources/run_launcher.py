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
  FAILED. Only sound where the daemon and the run worker share a machine: a run this launcher
  launched on another host (its ``maple/launched_on`` tag) is not judged by pid here.

Run monitoring then fails the run, and run retries launch it again (Maple's steps are
idempotent: the retry pays for nothing twice). The K8s and ECS launchers have their own checks.

Where the steps run away from the run worker (Dagster's celery executor: each step a task on
some worker host), the lease is beaten by the step's process, and a stale lease means a lost
step, not a lost run worker: that run worker still waits, forever, for the answer of a task
whose worker is gone. So when the check fails a run whose run worker was launched on this host
(the ``maple/launched_on`` tag) and still runs here, it ends that process (SIGKILL: a worker
interrupted politely still waits for its lost task). The run's retry re-executes the step.
"""

import contextlib
import os
import signal
import socket

import dagster as dg

from maple_engine.storage.layout import run_worker_folder
from maple_engine.storage.leases import Lease, pid_alive
from maple_engine.storage.storage import Storage
from resources.dagster_private import CheckRunHealthResult, LaunchRunContext, WorkerStatus

WORKER_ROOT_TAG = "maple/worker_lease_root"
LAUNCHED_ON_TAG = "maple/launched_on"


class LocalRunLauncher(dg.DefaultRunLauncher):
    """``dg.DefaultRunLauncher`` whose run workers run monitoring can check."""

    def launch_run(self, context: LaunchRunContext) -> None:
        """Launch as Dagster's default launcher does (a subprocess of this host's code server),
        tagging the run with this host's name."""
        run_id = context.dagster_run.run_id
        self._instance.add_run_tags(run_id, {LAUNCHED_ON_TAG: socket.gethostname()})
        super().launch_run(context)

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
                ended = self._end_run_worker(run)
                return CheckRunHealthResult(
                    WorkerStatus.FAILED,
                    f"run worker {holder.describe()} stopped beating {holder.age:.0f} s ago "
                    "(its process or host is gone)" + (f"; {ended}" if ended else ""),
                )
            if holder is None or holder.host != socket.gethostname():
                return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker between steps")
        return self._check_pid(run)

    def _check_pid(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        """Whether the run worker's process is alive, where it runs on this host."""
        pid = worker_pid(self._instance, run.run_id)
        if pid is None:  # not reported yet: run monitoring's start timeout covers this case
            return CheckRunHealthResult(WorkerStatus.RUNNING, "run worker not started yet")
        host = launched_on(run)
        if host is not None and host != socket.gethostname():  # its pid means nothing here
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker on {host}")
        if pid_alive(pid):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker pid {pid} is alive")
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"run worker pid {pid} is gone (killed or crashed)"
        )

    def _end_run_worker(self, run: dg.DagsterRun) -> str | None:
        """SIGKILL ``run``'s run worker where it was launched here and still runs (the process
        that wrote RUN_START, started before it: not a later process given the same pid)."""
        if launched_on(run) != socket.gethostname():
            return None
        start = run_start(self._instance, run.run_id)
        if start is None or not pid_alive(start[0]):
            return None
        pid, started = start
        began = process_started_at(pid)
        if began is None or began > started:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return f"its run worker (pid {pid} on this host, waiting for its lost step) was ended"


def launched_on(run: dg.DagsterRun | None) -> str | None:
    """The host whose ``LocalRunLauncher`` launched ``run`` (None for runs it did not launch)."""
    return run.tags.get(LAUNCHED_ON_TAG) if run is not None else None


def run_start(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """The pid of the process that wrote the run's RUN_START event (every Dagster event
    records the pid of the process that wrote it: the run worker) and that event's time."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.RUN_START, limit=1
    ).records
    entry = records[0].event_log_entry if records else None
    event = entry.dagster_event if entry is not None else None
    if entry is None or event is None or event.pid is None:
        return None
    return event.pid, entry.timestamp


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid (`run_start`)."""
    start = run_start(instance, run_id)
    return start[0] if start is not None else None


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` of this machine started (epoch seconds), None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


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
