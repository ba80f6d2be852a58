"""A server a test started with `running` that dies under the test is named as the cause: its
exit status and the end of its log (the hook in ``tests/conftest.py`` fails the test with them),
not the refused connection the job then sees."""

import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerCrashed, pytest_runtest_call
from tests.e2e.gateway_programs import crashed_programs, free_port, running


def test_a_server_that_segfaults_under_a_test_fails_it_as_that_crash(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    with running(command, f"http://127.0.0.1:{port}/", {}, tmp_path / "server.log") as server:
        assert crashed_programs() == []
        httpx.get(f"http://127.0.0.1:{port}/a-page-it-logs")
        server.send_signal(signal.SIGSEGV)
        server.wait(10)
        with pytest.raises(httpx.ConnectError):  # what the job sees
            httpx.get(f"http://127.0.0.1:{port}/")
        [crash] = crashed_programs()
        said = (
            r"the test's server \(python[\d.]* -m http\.server\) crashed, killed by SIGSEGV \(-11\)"
        )
        assert re.match(said, crash), crash
        assert "/a-page-it-logs" in crash  # and the end of its log
        call = pytest_runtest_call(None)  # the hook around a test body that then failed
        next(call)
        with pytest.raises(ServerCrashed, match=r"crashed, killed by SIGSEGV \(-11\)"):
            call.throw(AssertionError("error: connection refused"))
    assert crashed_programs() == []  # its block is closed: nothing is watched
