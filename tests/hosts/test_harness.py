"""The multi-host harness itself: hosts see their own names, and killing one host ends every
process it started (and their children, reparented or not) while the others run on."""

import os
import time
from pathlib import Path

from tests.hosts.harness import hosts, lingering

# A child, an orphan (its parent exits) and one in a new session, besides the shell itself.
TREE = "sleep 300 & (sleep 300 &) ; setsid sleep 300 & exec sleep 300"


def test_each_host_has_its_own_name_and_a_killed_host_loses_every_process(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "T_MARK": str(tmp_path)}
    with hosts(tmp_path, env, "host-a", "host-b") as (a, b):
        assert a.run(["hostname"], timeout=30).stdout.strip() == "host-a"
        assert b.run(["hostname"], timeout=30).stdout.strip() == "host-b"
        assert os.uname().nodename not in ("host-a", "host-b")
        for host in (a, b):
            host.start(["sh", "-c", TREE], log="tree")
        deadline = time.monotonic() + 10
        while min(len(a.pids()), len(b.pids())) < 5:  # keeper + sh + three sleeps
            assert time.monotonic() < deadline, (a.pids(), b.pids())
            time.sleep(0.05)
        a.kill()
        assert a.pids() == []
        assert len(b.pids()) >= 5  # the other host runs on
    assert b.pids() == []
    assert lingering(str(tmp_path)) == []


def test_a_killed_host_never_touches_the_host_that_inherits_its_namespace_number(
    tmp_path: Path,
) -> None:
    """The kernel gives a freed namespace's number to the next one made: another test's host,
    on another pytest worker. Stopping the killed host again (a test's teardown does) must
    leave that host's processes alone."""
    env = {**os.environ, "T_MARK": str(tmp_path)}
    with hosts(tmp_path, env, "host-a") as (a,):
        a.kill()
        with hosts(tmp_path, env, "host-c") as (c,):
            proc = c.start(["sleep", "300"], log="sleep")
            # c.namespace == old as a rule (unless another worker made a namespace in between)
            a.stop(grace=1.0)
            time.sleep(0.2)
            assert proc.poll() is None, "the killed host's stop ended another host's process"
    assert lingering(str(tmp_path)) == []
