"""Several hosts on one machine: each its own host name (a Linux UTS namespace) and its own set
of processes, over services every host reaches on loopback (PostgreSQL, moto's S3 server, the
emulator).

A `Host` starts a keeper process in a new UTS namespace named after the host; every command
the host runs enters that namespace (``nsenter --uts``) in a session of its own. So a host's
processes are exactly those in its namespace, whatever they fork (a Dagster daemon's code
server, the run workers it launches, their step processes) and whoever reparents them:
`kill` SIGKILLs all of them at once, as a machine that loses power loses them; `stop` ends them
politely first. Needs root (``unshare --uts``); tests skip without it.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
KEEPER = 'hostname "$0" && exec sleep infinity'


def can_simulate_hosts() -> bool:
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("unshare", "nsenter", "hostname"))


def uts_namespace(pid: int) -> str | None:
    """The UTS namespace of ``pid`` (``uts:[4026532...]``), None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None


class Host:
    """A simulated machine named ``name``, with ``env`` as its environment and ``home`` as its
    working folder (logs go to ``home/<log>.log``)."""

    def __init__(self, name: str, home: Path, env: dict[str, str]) -> None:
        if not can_simulate_hosts():
            pytest.skip("simulating hosts needs root and util-linux's unshare and nsenter")
        self.name, self.home, self.env = name, home, env
        home.mkdir(parents=True, exist_ok=True)
        self.keeper = subprocess.Popen(
            ["unshare", "--uts", "--", "sh", "-c", KEEPER, name], start_new_session=True
        )
        self.namespace = self._wait_for_namespace()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ended = False  # its namespace is gone: the kernel may give its number to another

    def _wait_for_namespace(self) -> str:
        mine = uts_namespace(os.getpid())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = uts_namespace(self.keeper.pid)
            named = found != mine and self._hostname_set()
            if found and named:
                return found
            time.sleep(0.01)
        raise AssertionError(f"host {self.name}: its UTS namespace never came up")

    def _hostname_set(self) -> bool:
        cmd = ["nsenter", "--uts", "-t", str(self.keeper.pid), "hostname"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return done.stdout.strip() == self.name

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", "--uts", "-t", str(self.keeper.pid), "--", *argv]

    def start(
        self, argv: Sequence[str], log: str, cwd: Path | None = None, **env: str
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host in a session of its own, output to ``home/<log>.log``."""
        with self.log_path(log).open("ab") as out:
            proc = subprocess.Popen(
                self.command(argv), cwd=cwd or self.home, env={**self.env, **env},
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def run(
        self, argv: Sequence[str], timeout: float, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host to its end; its output captured."""
        return subprocess.run(
            self.command(argv), cwd=cwd or self.home, env={**self.env, **env},
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def daemon(self, workspace: Path) -> subprocess.Popen[bytes]:
        """``dagster-daemon run`` on ``workspace``: its code server and run workers run here."""
        argv = [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)]
        return self.start(argv, "daemon", cwd=workspace.parent)

    def log_path(self, log: str) -> Path:
        return self.home / f"{log}.log"

    def log(self, log: str) -> str:
        path = self.log_path(log)
        return path.read_text(errors="replace") if path.exists() else ""

    def pids(self) -> list[int]:
        """Every process of this host (its keeper included), whoever its parent now is. Once
        none is left the host has ended for good: a namespace's number is free when its last
        process is gone and the kernel hands it to the next namespace made (another test's
        host, on another pytest worker), whose processes must not be taken for this host's."""
        if self.ended:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and uts_namespace(int(entry.name)) == self.namespace:
                found.append(int(entry.name))
        self.ended = not found
        return found

    def kill(self) -> float:
        """SIGKILL every process of this host at once, as a lost machine loses them; returns
        the time it was done (``time.time()``)."""
        while pids := self.pids():
            for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped first: nothing forks on
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
            self._reap()
        for proc in [self.keeper, *self.procs]:
            proc.wait(timeout=10)  # killed: reaped at once
        return time.time()

    def stop(self, grace: float = 10.0) -> None:
        """End this host's processes: SIGTERM, then whatever is left gets SIGKILL."""
        for pid in self.pids():
            if pid != self.keeper.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while len(self.pids()) > 1 and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.1)
        self.kill()

    def _reap(self) -> None:
        for proc in [self.keeper, *self.procs]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)


@contextlib.contextmanager
def hosts(home: Path, env: dict[str, str], *names: str) -> Iterator[list[Host]]:
    """Hosts ``names`` under ``home/<name>``; every process of each is gone at the end."""
    made: list[Host] = []
    try:
        for name in names:
            made.append(Host(name, home / name, env))
        yield made
    finally:
        for host in made:
            host.stop()
        left = {host.name: host.pids() for host in made if host.pids()}
        assert not left, f"processes left behind on hosts: {left}"


def lingering(marker: str) -> list[str]:
    """Command lines of live processes whose command line or environment mention ``marker``
    (a test's folder): a Dagster code server (``dagster api grpc``) left running, say."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(f"{entry.name}: {cmdline}")
    return found


def wait_for(
    what: str, done: Callable[[], bool], timeout: float, story: Callable[[], str]
) -> float:
    """Wait until ``done()``; past ``timeout`` fail with ``story()`` (the logs read then)."""
    began = time.monotonic()
    while not done():
        assert time.monotonic() - began < timeout, (
            f"{what} did not happen in {timeout} s\n{story()}"
        )
        time.sleep(0.2)
    return time.time()
