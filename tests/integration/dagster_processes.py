"""Dagster's own processes for tests: ``dagster dev`` on a folder's workspace, on a free port,
and GraphQL calls to its webserver."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

DAGSTER = str(Path(sys.executable).parent / "dagster")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dagster_dev(folder: Path, env: dict[str, str]) -> Iterator[int]:
    """``dagster dev`` on ``folder``'s workspace.yaml, logging to ``folder/dev.log``; yields
    its port; stops its whole process group at the end."""
    port = free_port()
    with (folder / "dev.log").open("wb") as log:
        dev = subprocess.Popen(
            [DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield port
    finally:
        os.killpg(dev.pid, signal.SIGTERM)
        try:
            dev.wait(timeout=30)
        except subprocess.TimeoutExpired:  # not stopped in 30 s (a loaded machine): kill it
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=30)  # reaped: no "subprocess is still running" at teardown


def dev_folder(folder: Path, defs: str, location: str, emulator: str, **env: str) -> dict[str, str]:
    """Make ``folder`` a ``dagster dev`` project: ``defs`` as defs.py, a workspace.yaml naming
    it code location ``location``, a throwaway instance home; return the environment to run it
    in: this one without its Maple and AWS settings, the home, the storage root under
    ``folder``, the emulator's URL ``emulator``, this repository on the path, and ``env``."""
    (folder / "defs.py").write_text(defs)
    (folder / "workspace.yaml").write_text(
        f"load_from:\n  - python_file:\n      relative_path: defs.py\n"
        f"      location_name: {location}\n"
    )
    home = folder / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MAPLE_", "AWS_"))}
    return clean | {
        "DAGSTER_HOME": str(home),
        "MAPLE_STORAGE": str(folder / "store"),
        "MAPLE_EMULATOR_URL": emulator,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        **env,
    }


def graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> Any:
    body = orjson.dumps({"query": query, "variables": variables or {}})
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return orjson.loads(response.read())


def wait_ready(url: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            data = graphql(url, "{ repositoriesOrError { __typename } }")
            if data["data"]["repositoriesOrError"]["__typename"] == "RepositoryConnection":
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"dagster dev did not come up:\n{log.read_text()[-3000:]}")
