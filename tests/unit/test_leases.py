"""Exclusive create, leases and batch claims on a local storage root, across threads and
processes, and the same on SeaweedFS where it is installed (`root`; moto's flavour is in
tests/integration/test_claims_s3.py)."""

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from maple_engine.model import Submission
from maple_engine.storage.claims import JobRunning, claim_batch, driver_lease
from maple_engine.storage.leases import Lease
from maple_engine.storage.storage import Storage
from tests.conftest import BUCKET

REPO = Path(__file__).parents[2]
DIE_HOLDING = """
import os, sys
from maple_engine.storage.leases import Lease
from maple_engine.storage.storage import Storage
assert Lease(Storage(sys.argv[1]), sys.argv[2], what="doomed").acquire()
os._exit(0)  # dies holding the lease: no release, no more beats
"""


def submission(shard: str, batch: str) -> Submission:
    return Submission("emulator", "job", shard, 1, batch, 3, "h", "now")


@pytest.fixture(params=["local", "seaweedfs"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A local storage root, or one on SeaweedFS (the AWS variables pointed at it)."""
    if request.param == "local":
        return str(tmp_path)
    request.getfixturevalue("seaweedfs")
    return f"s3://{BUCKET}/leases"


def die_holding(root: str, folder: str) -> None:
    aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    env = {"PYTHONPATH": str(REPO), "HOME": os.environ["HOME"], **aws}
    subprocess.run([sys.executable, "-c", DIE_HOLDING, root, folder], env=env, check=True)


def test_create_exclusive_lets_exactly_one_of_many_threads_win(root: str) -> None:
    storage = Storage(root)
    with ThreadPoolExecutor(max_workers=8) as pool:
        wins = list(pool.map(lambda i: storage.create_exclusive("a/b.json", b"%d" % i), range(32)))
    assert wins.count(True) == 1
    assert storage.read_bytes("a/b.json") == b"%d" % wins.index(True)
    assert storage.list_keys("a") == ["a/b.json"]  # no temp files left


def test_a_held_lease_is_refused_then_free_once_released(root: str) -> None:
    storage = Storage(root)
    first, second = Lease(storage, "L", "first"), Lease(storage, "L", "second")
    assert first.acquire() and not first.taken_over
    assert not second.acquire()
    holder = second.holder()
    assert holder is not None and "first (pid" in holder.describe()
    first.release()
    assert second.holder() is None
    assert second.acquire() and second.taken_over and second.generation == 2


def test_a_lease_whose_holder_died_is_taken_over(root: str) -> None:
    die_holding(root, "L")
    lease = Lease(Storage(root), "L", "heir", ttl_s=3600)  # not by age: pid is gone
    assert lease.acquire() and lease.taken_over


def test_a_lease_expires_without_beats_and_stays_held_while_beating(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    holder = Lease(storage, "L", "holder", ttl_s=2.0)
    assert holder.acquire()
    with holder.hold():  # beats every 0.5 s: still held well past one TTL
        time.sleep(3.0)
        assert not Lease(storage, "L", "other", ttl_s=2.0).acquire()
    silent = Lease(storage, "M", "silent", ttl_s=0.3)
    assert silent.acquire()
    time.sleep(0.5)  # alive (same pid) but silent past its TTL
    assert Lease(storage, "M", "other", ttl_s=0.3).acquire()


def test_one_claimant_creates_the_batch_and_the_others_adopt_it(root: str) -> None:
    storage = Storage(root)
    recorded: list[Submission] = []
    created: list[bool] = []
    lock = threading.Lock()

    def create(taken_over: bool) -> Submission:
        time.sleep(0.3)  # the upload: long enough for every thread to try the claim
        with lock:
            created.append(taken_over)
            recorded.append(submission("s1", f"batch_{len(created)}"))
        return recorded[-1]

    def claim(_: int) -> Submission | None:
        return claim_batch(storage, "claim", lambda: recorded[-1] if recorded else None, create)

    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(claim, range(6)))
    assert created == [False]
    assert {s.batch_id for s in got if s is not None} == {"batch_1"} and None not in got


def test_a_dead_claimants_claim_is_taken_over_and_told_so(root: str) -> None:
    die_holding(root, "claim")
    storage = Storage(root)
    seen: list[bool] = []

    def create(taken_over: bool) -> Submission:
        seen.append(taken_over)
        return submission("s1", "adopted_or_new")

    assert claim_batch(storage, "claim", lambda: None, create) is not None
    assert seen == [True]  # the caller lists the provider's batches again before creating


def test_a_second_driver_fails_at_once_saying_who_runs_the_job(root: str) -> None:
    storage = Storage(root)
    lease = driver_lease(storage, "job/state/driver", "job", wait=False)
    with pytest.raises(JobRunning, match=r"job 'job' is already running: maple enrich on .*pid"):
        driver_lease(storage, "job/state/driver", "job", wait=False)
    lease.release()
    driver_lease(storage, "job/state/driver", "job", wait=False).release()
