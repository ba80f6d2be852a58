"""Leases judged on the storage's clock, and a host whose clock is too far off refused
(``MAPLE_CLOCK_OFFSET_S`` shifts this process's clock; the S3 flavour is in
tests/integration/test_claims_s3.py, the cross-host one in tests/hosts/)."""

import os
import time
from pathlib import Path

import orjson
import pytest

from maple_engine.storage.claims import driver_lease
from maple_engine.storage.clock import OFFSET_ENV, ClockSkew, check_skew
from maple_engine.storage.leases import TTL_ENV, Lease
from maple_engine.storage.storage import Storage

TTL = 8.0  # tolerated skew: 2 s either way


def other_hosts_record(root: Path, folder: str, beat: float) -> Path:
    """A live-looking record of a holder on another host whose clock says ``beat``."""
    path = root / folder / "00000001.json"
    path.parent.mkdir(parents=True)
    record = {"host": "elsewhere", "pid": 1, "what": "far", "since": beat, "beat": beat}
    path.write_bytes(orjson.dumps({**record, "token": "t"}))
    return path


def test_a_holder_whose_clock_is_far_behind_still_holds_while_it_writes(tmp_path: Path) -> None:
    other_hosts_record(tmp_path, "L", beat=time.time() - 1000)  # its clock: 1000 s behind
    lease = Lease(Storage(str(tmp_path)), "L", "here", ttl_s=TTL)
    assert not lease.acquire()
    holder = lease.holder()
    assert holder is not None and holder.age < 1.0


def test_a_holder_whose_clock_is_far_ahead_lapses_when_its_record_does(tmp_path: Path) -> None:
    path = other_hosts_record(tmp_path, "L", beat=time.time() + 1000)  # its clock: ahead
    old = time.time() - TTL - 1
    os.utime(path, (old, old))  # last written a TTL ago by the storage's clock
    lease = Lease(Storage(str(tmp_path)), "L", "heir", ttl_s=TTL)
    assert lease.acquire() and lease.taken_over


@pytest.mark.parametrize("offset", ["-2", "2"])
def test_a_quarter_of_the_ttl_either_way_is_tolerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offset: str
) -> None:
    monkeypatch.setenv(OFFSET_ENV, offset)
    storage = Storage(str(tmp_path))
    first = Lease(storage, "L", "first", ttl_s=TTL)
    assert first.acquire() and not Lease(storage, "L", "second", ttl_s=TTL).acquire()
    first.release()
    assert Lease(storage, "L", "third", ttl_s=TTL).acquire()


@pytest.mark.parametrize(("offset", "side"), [("-2.5", "behind"), ("40", "ahead of")])
def test_a_larger_skew_is_refused_before_the_lease_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offset: str, side: str
) -> None:
    monkeypatch.setenv(OFFSET_ENV, offset)
    monkeypatch.setenv(TTL_ENV, str(TTL))
    storage = Storage(str(tmp_path))
    with pytest.raises(ClockSkew) as caught:
        driver_lease(storage, "job/state/driver", "job", wait=False)
    message = str(caught.value)
    assert f"s {side} the storage's clock ({tmp_path})" in message
    assert "NTP" in message and "\n" not in message
    assert not (tmp_path / "job").exists()  # nothing taken


def test_the_check_allows_the_storage_clocks_resolution() -> None:
    check_skew(local=100.0, server=97.5, ttl_s=8.0, where="s3://b", slack_s=0.5)
    with pytest.raises(ClockSkew, match=r"3\.0 s ahead of"):
        check_skew(local=100.0, server=97.0, ttl_s=8.0, where="s3://b", slack_s=0.5)
