"""One team's failure never stalls another: a job that failed, was interrupted or was killed
between its queue admission and its batch's creation leaves nothing in the provider queue
budget, and the next job on the same model runs at once (not after the 25-hour window).

Each case: job A goes through a proxy in front of the emulator that refuses (or hangs on) the
batch file upload, so A is admitted into the queue (whose limit is not known yet: every other
batch waits for the ones admitted) and then dies before anything reaches the provider. Job B,
another team's, on the same storage root and model, must then finish within seconds."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

KEY = "sk-queue-owner"
REFUSED = (
    b'{"error": {"message": "this key may not upload files", "type": "invalid_request_error", '
    b'"code": "permission_denied"}}'
)


class _Proxy(BaseHTTPRequestHandler):
    """Forwards to the emulator; a batch file upload is refused (403) or hangs."""

    target = ""
    upload = "refuse"  # refuse | hang
    uploads = threading.Event()
    released = threading.Event()  # ends a hanging upload (a handler thread printed to other
    # tests' stderr when its 120 s sleep ended in a later test of the same worker)

    def do_GET(self) -> None:
        self._forward(b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.endswith("/files"):
            type(self).uploads.set()
            if type(self).upload == "hang":
                type(self).released.wait(120)  # until the test ends
                return
            self._answer(403, REFUSED)
            return
        self._forward(body)

    def _forward(self, body: bytes) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host",)}
        answer = httpx.request(
            self.command, self.target + self.path, headers=headers, content=body, timeout=30
        )
        self._answer(answer.status_code, answer.content, answer.headers.get("content-type"))

    def _answer(self, status: int, body: bytes, kind: str | None = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", kind or "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        # the client may have been killed meanwhile (the tests kill it): nothing to print
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, str]]:
    """(proxy URL, emulator URL)."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as emulator:
        _Proxy.target, _Proxy.upload = emulator.url, "refuse"
        _Proxy.uploads, _Proxy.released = threading.Event(), threading.Event()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}", emulator.url
        _Proxy.released.set()
        server.shutdown()
        server.server_close()


def _args(tmp_path: Path, job: str, team: str, root: str = "store") -> list[str]:
    table = tmp_path / "items.csv"
    if not table.exists():
        pl.DataFrame({"title": [f"item {i}" for i in range(20)]}).write_csv(table)
    return [
        sys.executable, "-m", "maple_assets.cli", "enrich", str(table), "--prompt", "About {title}",
        "--model", "gpt-4o-mini", "--provider", "openai", "--storage", str(tmp_path / root),
        "--job", job, "--team", team, "--output", str(tmp_path / f"{job}.parquet"),
        "--poll-interval", "0.2", "--quiet",
    ]  # fmt: skip


def _env(base: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAPLE_", "OPENAI_"))}
    return {**env, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": f"{base}/v1", **more}


def _second_job_runs_at_once(tmp_path: Path, emulator: str, **more: str) -> None:
    started = time.monotonic()
    result = subprocess.run(
        _args(tmp_path, "second", "search", more.pop("root", "store")),
        capture_output=True, text=True, env=_env(emulator, **more), timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "waiting" not in result.stderr + result.stdout
    assert (
        pl.read_parquet(tmp_path / "second.parquet")["llm_status"].to_list() == ["succeeded"] * 20
    )
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_job_whose_upload_failed_holds_no_queue_room(
    tmp_path: Path, proxy: tuple[str, str]
) -> None:
    url, emulator = proxy
    first = subprocess.run(
        _args(tmp_path, "first", "catalog"),
        capture_output=True, text=True, env=_env(url), timeout=120, check=False,
    )  # fmt: skip
    assert first.returncode != 0 and _Proxy.uploads.is_set(), first.stderr
    assert first.returncode == 2 and "403" in first.stderr, first.stderr
    _second_job_runs_at_once(tmp_path, emulator)


@pytest.mark.parametrize(
    ("how", "roots"),
    [
        (signal.SIGKILL, "one root"),
        pytest.param(signal.SIGINT, "one root", marks=pytest.mark.slow),
        pytest.param(signal.SIGKILL, "two roots", id="SIGKILL-two-roots", marks=pytest.mark.slow),
    ],
)
def test_a_job_killed_before_its_batch_was_created_holds_no_queue_room(
    tmp_path: Path, proxy: tuple[str, str], how: signal.Signals, roots: str
) -> None:
    """Two roots: each team keeps its own storage root and both share one cost ledger
    (``MAPLE_COST_DB``); the second job reads the first's lease from the root its slot names."""
    url, emulator = proxy
    _Proxy.upload = "hang"
    ledger = f"sqlite:///{tmp_path / 'costs.db'}"
    shared = {"MAPLE_COST_DB": ledger} if roots == "two roots" else {}
    with (tmp_path / "first.err").open("w") as err:
        first = subprocess.Popen(
            _args(tmp_path, "first", "catalog"),
            stdout=subprocess.DEVNULL, stderr=err, env=_env(url, **shared),
            start_new_session=True,
        )  # fmt: skip
        try:
            assert _Proxy.uploads.wait(90), "the first job never uploaded"
            os.killpg(first.pid, how)
            first.wait(60)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
    if how == signal.SIGINT:
        assert first.returncode == 130, (tmp_path / "first.err").read_text()
    if shared:
        _second_job_runs_at_once(tmp_path, emulator, root="other-store", **shared)
    else:
        _second_job_runs_at_once(tmp_path, emulator)


@pytest.mark.slow
def test_a_live_job_is_waited_for_and_named_until_it_is_gone(
    tmp_path: Path, proxy: tuple[str, str]
) -> None:
    """While the first job is alive and uploading, the second waits (the limit is being
    learned) and `maple status` says for whom; once the first is killed, the second goes on."""
    url, emulator = proxy
    _Proxy.upload = "hang"
    first = subprocess.Popen(
        _args(tmp_path, "first", "catalog"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(url),
        start_new_session=True,
    )  # fmt: skip
    second = None
    try:
        assert _Proxy.uploads.wait(90), "the first job never uploaded"
        second = subprocess.Popen(
            _args(tmp_path, "second", "search"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(emulator),
            start_new_session=True,
        )  # fmt: skip
        status = [sys.executable, "-m", "maple_assets.cli", "status", "second"]
        status += ["--storage", str(tmp_path / "store")]
        deadline, shown = time.monotonic() + 90, ""
        while "being sent by job(s) first" not in shown and time.monotonic() < deadline:
            time.sleep(1)
            shown = subprocess.run(
                status, capture_output=True, text=True, env=_env(emulator), check=False
            ).stdout
        assert "queue: " in shown and "being sent by job(s) first" in shown, shown
        assert second.poll() is None  # it waits for the live first job
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        assert second.wait(60) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
