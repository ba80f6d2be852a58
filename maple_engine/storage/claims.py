"""Exactly-once batch creation across processes, and one CLI driver per job.

Before anything is uploaded for attempt n of a shard, the submitting process takes the claim
``<job>/state/<shard>/claim-<n>/`` (a `maple_engine.storage.leases.Lease`: an exclusive create on
the
storage root). Of two processes submitting the same attempt at once (two ``maple enrich``, a UI
run beside a CLI run, a re-executed run beside its original) one wins and creates the batch; the
other waits until the winner records ``submission-<n>.json`` and adopts that batch. When the
winner dies before recording, its claim goes stale and one waiter takes it over: it lists the
provider's batches again and adopts the one the dead winner created (found by its metadata), and
only creates a batch when there is none.
"""

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator

from maple_engine.errors import ConfigError
from maple_engine.model import Submission
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.leases import Lease
from maple_engine.storage.storage import Storage

WAIT_POLL_S = 0.25


def _what() -> str:
    run = os.environ.get("DAGSTER_RUN_ID")
    return f"dagster run {run}" if run else "maple enrich"


def claim_batch(
    storage: Storage,
    folder: str,
    recorded: Callable[[], Submission | None],
    create: Callable[[bool], Submission | None],
) -> Submission | None:
    """The attempt's submission: the one already recorded, or ``create(taken_over)`` run under
    the claim ``folder``; waits while another live process holds the claim."""
    lease = Lease(storage, folder, what=_what())
    while True:
        existing = recorded()
        if existing is not None:
            return existing
        if lease.acquire():
            with lease.hold():
                existing = recorded()  # the previous holder may have recorded, then released
                return existing if existing is not None else create(lease.taken_over)
        time.sleep(WAIT_POLL_S)


@contextlib.contextmanager
def sharding_lease(storage: Storage, folder: str) -> Iterator[None]:
    """Hold the job's sharding lease while cutting its shards: two ``input_shards`` runs of one
    job at once (a UI run beside a CLI driver, a re-executed run beside its original) would
    otherwise write the same version's files over each other. The second waits, then finds
    the version cut and resumes it."""
    lease = Lease(storage, folder, what=_what())
    while not lease.acquire():
        time.sleep(WAIT_POLL_S)
    with lease.hold():
        yield


class JobRunning(ConfigError):
    """Another ``maple enrich`` drives this job right now."""


def driver_lease(storage: Storage, folder: str, job: str, wait: bool) -> Lease:
    """Take the job's driver lease (one ``maple enrich`` per job); with ``wait``, wait for the
    running driver to finish, else fail at once saying who drives it and since when."""
    lease = Lease(storage, folder, what=f"maple enrich on {socket.gethostname()}")
    announced = False
    while not lease.acquire():
        holder = lease.holder()
        if holder is None:  # freed between the two reads: try again
            time.sleep(WAIT_POLL_S)
            continue
        if not wait:
            raise JobRunning(
                f"job {job!r} is already running: {holder.describe()}, lease "
                f"{storage.uri(folder)}. Wait for it to finish (or pass --wait to wait and then "
                "print its result); a lease whose holder died expires by itself."
            )
        if not announced:
            print(f"waiting for {holder.describe()} to finish job {job!r}", file=sys.stderr)
            announced = True
        time.sleep(1.0)
    return lease


def driver_gone(storage: Storage, job: str) -> bool:
    """True when ``job`` was driven by ``maple enrich`` and that driver is gone: it ended
    (failed, stopped, interrupted) or its process died. False when it runs or never had one."""
    lease = Lease(storage, JobLayout(job).driver, what="")
    generation, holder = lease.current()
    return generation > 0 and holder is not None and holder.stale(lease.ttl_s)
