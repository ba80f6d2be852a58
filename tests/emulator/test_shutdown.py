"""``maple emulator`` as a process: stopped as a service manager or a benchmark stops it
(SIGTERM), it deletes the files it kept (a 1M-row batch job leaves about 1 GB of them)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_sigterm_deletes_the_emulators_files(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "maple_assets.cli", "emulator", "--port", str(port)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_emulator/stats", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        kept = list(tmp_path.glob("maple-emulator-*"))
        assert len(kept) == 1  # its files live there while it serves
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert not list(tmp_path.glob("maple-emulator-*"))
