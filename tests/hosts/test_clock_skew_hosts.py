"""Leases across hosts whose clocks disagree, on moto's S3 server: a holder and an heir each a
quarter of the TTL off (in opposite directions) keep one holder at a time, and the heir takes
over one TTL after the holder's host is lost, as with true clocks; a host further off is
refused with a one-line error naming the skew and NTP."""

import os
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.hosts.harness import Host, hosts
from tests.integration.test_deployment_postgres import s3_endpoint

__all__ = ["s3_endpoint"]  # fixture
REPO = Path(__file__).parents[2]
ROOT = "s3://maple/root"
TTL = 8.0  # tolerated skew: 2 s either way
HOLD = """
import sys, time, orjson
from maple_engine.storage.leases import Lease
from maple_engine.storage.storage import Storage
root, folder, what, ttl = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lease = Lease(Storage(root), folder, what=what, ttl_s=ttl)
try:
    while not lease.acquire():
        time.sleep(0.2)
except Exception as exc:
    print(orjson.dumps({"refused": str(exc)}).decode(), flush=True)
    sys.exit(2)
print(orjson.dumps({"took": time.time(), "taken_over": lease.taken_over}).decode(), flush=True)
with lease.hold():
    time.sleep(3600)
"""


def env_for(endpoint: str) -> dict[str, str]:
    return {
        **os.environ, "PYTHONPATH": str(REPO), "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1",
    }  # fmt: skip


def hold(host: Host, offset: float) -> None:
    argv = [sys.executable, "-c", HOLD, ROOT, "job/state/driver", host.name, str(TTL)]
    host.start(argv, log="lease", MAPLE_CLOCK_OFFSET_S=str(offset))


def reported(host: Host, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while not (lines := host.log("lease").splitlines()) or not lines[-1].startswith("{"):
        assert time.monotonic() < deadline, f"{host.name}: {host.log('lease')[-2000:]}"
        time.sleep(0.05)
    return dict(orjson.loads(lines[-1]))


def takeover(tmp_path: Path, endpoint: str, holder_offset: float) -> float:
    """Seconds from losing the holder's host to the heir holding the lease."""
    with hosts(tmp_path, env_for(endpoint), "host-a", "host-b") as (a, b):
        hold(a, holder_offset)
        assert reported(a, timeout=60)["taken_over"] is False
        hold(b, -holder_offset)
        time.sleep(1.5 * TTL)  # a TTL and a half of beats by a clock the heir disagrees with
        assert b.log("lease") == "", b.log("lease")
        lost = a.kill()
        took = reported(b, timeout=4 * TTL)
    assert took["taken_over"] is True
    seconds = float(str(took["took"])) - lost
    print(f"takeover {seconds:.1f} s after the host was lost (TTL {TTL:g} s, holder's clock "
          f"{holder_offset:+g} s, heir's {-holder_offset:+g} s)")  # fmt: skip
    return seconds


@pytest.mark.slow  # ~20 s each way: the refusals stay in the default suite
@pytest.mark.parametrize("holder_offset", [-TTL / 4, TTL / 4])
def test_hosts_a_quarter_ttl_off_keep_one_holder_and_take_over_after_one_ttl(
    tmp_path: Path, s3_endpoint: str, holder_offset: float
) -> None:
    seconds = takeover(tmp_path, s3_endpoint, holder_offset)
    # The holder's last beat came at most TTL/4 before the loss; S3 dates are whole seconds.
    assert TTL - TTL / 4 - 1.5 <= seconds <= TTL + 4.0, seconds


@pytest.mark.parametrize("offset", [-TTL, 3 * TTL])
def test_a_host_further_off_is_refused(tmp_path: Path, s3_endpoint: str, offset: float) -> None:
    with hosts(tmp_path, env_for(s3_endpoint), "host-c") as (c,):
        hold(c, offset)
        got = reported(c, timeout=60)
    message = str(got["refused"])
    side = "behind" if offset < 0 else "ahead of"
    assert f"s {side} the storage's clock (s3://maple/root)" in message, message
    assert "tolerate 2.0 s" in message and "NTP" in message
