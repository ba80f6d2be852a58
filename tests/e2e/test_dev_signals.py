"""``maple dev`` started as a script starts a command in the background (SIGINT ignored, as a
non-interactive shell leaves it) stops on SIGTERM and on SIGINT, with its webserver, daemon and
code servers: ``dagster dev`` itself maps SIGTERM to SIGINT's disposition and ignores both."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.dagster_processes import free_port, wait_ready

MAPLE = str(Path(sys.executable).parent / "maple")


def session_pids(sid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow  # dagster dev's start-up: ~20 s each
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_maple_dev_started_in_the_background_stops_with_every_child(
    tmp_path: Path, sig: signal.Signals
) -> None:
    (tmp_path / "defs.py").write_text("import dagster as dg\n\ndefs = dg.Definitions()\n")
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: defs.py\n      location_name: quiet\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = os.environ | {"DAGSTER_HOME": str(home)}
    port = free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        # SIGINT ignored, as `maple dev &` in a script leaves it; exec: the same process
        script = f'trap "" INT; exec {MAPLE} dev -h 127.0.0.1 -p {port}'
        dev = subprocess.Popen(
            ["bash", "-c", script], cwd=tmp_path, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", log)
        assert len(session_pids(dev.pid)) >= 4  # dagster dev, webserver, daemon, code server
        dev.send_signal(sig)
        dev.wait(timeout=60)
        deadline = time.monotonic() + 30
        while session_pids(dev.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_pids(dev.pid) == [], log.read_text()[-3000:]
        assert "Dagster services shut down." in log.read_text()
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=30)
