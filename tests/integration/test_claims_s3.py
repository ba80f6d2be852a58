"""The exclusive create behind batch claims and driver leases, on moto's S3 server over HTTP and
on SeaweedFS (a real store, `tests.seaweedfs`): a PutObject with ``If-None-Match: *``."""

import contextlib
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from maple_engine.storage.clock import OFFSET_ENV, ClockSkew
from maple_engine.storage.leases import Lease
from maple_engine.storage.storage import Storage
from tests.conftest import BUCKET as SEAWEEDFS_BUCKET

BUCKET = "maple-claims"


@contextlib.contextmanager
def moto_s3(monkeypatch: pytest.MonkeyPatch, threaded: bool = True) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with a bucket, the environment pointed at it; yields the
    storage root. ``threaded=False``: it answers one request at a time (see ``serial_s3_root``)."""
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    try:
        for key, value in {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(key, value)
        reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(reset, timeout=10).read()
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}/root"
    finally:
        server.shutdown()
        thread.join()


@pytest.fixture(params=["moto", "seaweedfs"])
def s3_root(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "seaweedfs":
        request.getfixturevalue("seaweedfs")
        yield f"s3://{SEAWEEDFS_BUCKET}/root"
        return
    with moto_s3(monkeypatch) as root:
        yield root


@pytest.fixture(params=["moto", "seaweedfs"])
def racing_root(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto answering one request at a time, or SeaweedFS. moto's conditional PutObject checks
    for the key and then writes it, two steps, so on its threaded server two racing writers can
    both pass the check (CI saw two winners of 12 on a slow machine); S3 and SeaweedFS decide
    atomically. One request at a time makes moto as atomic as they are, and the race then tests
    the client: the losers' 412s."""
    if request.param == "seaweedfs":
        request.getfixturevalue("seaweedfs")
        yield f"s3://{SEAWEEDFS_BUCKET}/root"
        return
    with moto_s3(monkeypatch, threaded=False) as root:
        yield root


def test_conditional_put_lets_exactly_one_writer_win(racing_root: str) -> None:
    storage = Storage(racing_root)
    assert storage.create_exclusive("job/claim.json", b"first")
    assert not storage.create_exclusive("job/claim.json", b"second")
    assert storage.read_bytes("job/claim.json") == b"first"
    with ThreadPoolExecutor(max_workers=6) as pool:
        wins = list(pool.map(lambda i: storage.create_exclusive("race", b"%d" % i), range(12)))
    assert wins.count(True) == 1
    assert storage.read_bytes("race") == b"%d" % wins.index(True)


def test_a_lease_on_s3_is_held_once_and_handed_on_after_release(s3_root: str) -> None:
    storage = Storage(s3_root)
    first, second = Lease(storage, "job/driver", "first"), Lease(storage, "job/driver", "second")
    assert first.acquire() and not second.acquire()
    first.beat()
    holder = second.holder()
    assert holder is not None and holder.what == "first"
    first.release()
    assert second.acquire() and second.generation == 2


def test_a_lease_on_s3_is_judged_on_the_storage_clock_and_a_skewed_host_refused(
    s3_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage(s3_root)
    assert abs(storage.server_time() - time.time()) < 2.0  # the store's Date: this machine's clock
    monkeypatch.setenv(OFFSET_ENV, "-5")  # a quarter of the TTL behind: tolerated
    holder = Lease(storage, "job/driver", "behind", ttl_s=20.0)
    assert holder.acquire()
    assert storage.age("job/driver/00000001.json") < 2.0  # however far off the writer's clock
    monkeypatch.setenv(OFFSET_ENV, "5")
    assert not Lease(storage, "job/driver", "ahead", ttl_s=20.0).acquire()
    holder.release()
    monkeypatch.setenv(OFFSET_ENV, "12")
    with pytest.raises(ClockSkew, match=r"1[12]\.\d s ahead of the storage's clock \(s3://"):
        Lease(storage, "job/driver", "far ahead", ttl_s=20.0).acquire()


def test_ages_under_a_folder_are_read_on_the_storage_clock(
    s3_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage(s3_root)
    monkeypatch.setenv(OFFSET_ENV, "3600")  # this host's clock: no part in it
    storage.write_bytes("beats/a.json", b"{}")
    storage.write_bytes("beats/b.json", b"{}")
    ages = storage.ages("beats")
    assert sorted(ages) == ["beats/a.json", "beats/b.json"]
    assert all(-1.5 < age < 3.0 for age in ages.values()), ages
    assert storage.ages("nothing") == {}
