"""The summary says what happened and the exit code follows the README's table, through
``maple enrich`` as a user runs it: ``sent`` is what this run sent (nothing, when a budget stops
the job first; not the whole job's total, when a run resumes), a queue limit no request fits is
a usage error (exit 2), and insufficient quota stops the job (exit 4) whether the provider
refuses the batch itself, fails its rows, or answers real-time requests."""

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.test_budget import ROWS, enrich, plan_value
from tests.e2e.test_hostile import one_line


def figure(stdout: str, label: str) -> int:
    match = re.search(rf"^{label}\s+([\d,]+)", stdout, re.MULTILINE)
    assert match, f"no {label!r} in:\n{stdout}"
    return int(match.group(1).replace(",", ""))


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, seed=3)) as live:
        yield live


def test_a_budget_that_stops_the_job_first_sends_nothing_and_says_so(
    server: EmulatorServer, tmp_path: Path
) -> None:
    stopped = enrich(server, tmp_path, "--budget", "0.000000001")
    assert stopped.returncode == 4, stopped.stderr
    assert figure(stopped.stdout, "sent") == 0
    assert figure(stopped.stdout, "  not_sent") > 0
    assert server.stats()["files_uploaded"] == 0 and server.stats()["requests_billed"] == 0


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_resumed_run_counts_only_what_it_sent(server: EmulatorServer, tmp_path: Path) -> None:
    dry = enrich(server, tmp_path, "--dry-run")
    per_batch = plan_value(dry.stdout, "batch USD") / 5  # 5 shards of 60 similar rows
    first = enrich(server, tmp_path, "--budget", f"{2.5 * per_batch:.8f}")
    assert first.returncode == 4, first.stderr
    billed = server.stats()["requests_billed"]
    assert figure(first.stdout, "sent") == billed > 0

    resumed = enrich(server, tmp_path, "--budget", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert figure(resumed.stdout, "sent") == server.stats()["requests_billed"] - billed > 0
    assert figure(resumed.stdout, "rows") == ROWS

    again = enrich(server, tmp_path, "--budget", "1")  # nothing left to send
    assert again.returncode == 0 and figure(again.stdout, "sent") == 0
    assert re.search(r"^cost USD\s+0\.000000$", again.stdout, re.MULTILINE)


def test_a_queue_limit_no_request_fits_is_a_usage_error(
    server: EmulatorServer, tmp_path: Path
) -> None:
    refused = enrich(server, tmp_path, "--max-enqueued-tokens", "1")
    assert refused.returncode == 2, refused.stderr
    line = one_line(refused.stderr)
    assert "--max-enqueued-tokens 1 is below the smallest request" in line
    assert "--max-requests-per-batch" not in line
    assert server.stats()["files_uploaded"] == 0


class QuotaRefusingOpenAI(BaseHTTPRequestHandler):
    """An OpenAI-compatible API whose account is out of credit: it lists, takes files, and
    refuses every batch with 429 ``insufficient_quota`` (as OpenAI does)."""

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200, {"object": "list", "data": [], "has_more": False})

    def do_DELETE(self) -> None:
        self._answer(200, {"id": self.path.rsplit("/", 1)[-1], "deleted": True})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/files"):
            file = {"id": "file-1", "object": "file", "bytes": 1, "created_at": 0,
                    "filename": "in.jsonl", "purpose": "batch", "status": "processed"}  # fmt: skip
            self._answer(200, file)
            return
        message = "You exceeded your current quota, please check your plan and billing details."
        error = {"message": message, "type": "insufficient_quota", "code": "insufficient_quota"}
        self._answer(429, {"error": error})

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.slow  # about 30 s: the real-time lane's quota stop waits out its retries
def test_insufficient_quota_exits_4_in_batch_and_real_time(
    server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["a", "b", "c"]}).write_csv(table)
    args = ["enrich", str(table), "--prompt", "About {title}", "--model", "gpt-4o-mini",
            "--poll-interval", "0.2", "--quiet"]  # fmt: skip

    refusing = ThreadingHTTPServer(("127.0.0.1", 0), QuotaRefusingOpenAI)
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    try:
        env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{refusing.server_port}/v1",
               "OPENAI_API_KEY": "sk-test"}  # fmt: skip
        batch = maple(*args, "--storage", str(tmp_path / "a"), url=server.url, **env)
    finally:
        refusing.shutdown()
        refusing.server_close()
    assert batch.returncode == 4, batch.stderr
    assert "insufficient quota" in batch.stderr and "Traceback" not in batch.stderr
    assert figure(batch.stdout, "sent") == 0

    with EmulatorServer(EmulatorConfig(fail={"insufficient_quota": 1.0})) as broke:
        env = {"OPENAI_BASE_URL": f"{broke.url}/v1", "OPENAI_API_KEY": "sk-test"}
        realtime = maple(
            *args, "--provider", "openai-realtime", "--storage", str(tmp_path / "b"),
            url=server.url, **env,
        )  # fmt: skip
        rows = maple(
            *args, "--provider", "emulator", "--storage", str(tmp_path / "c"), url=broke.url, **env
        )
    assert realtime.returncode == 4, realtime.stderr
    assert "insufficient quota" in realtime.stderr
    assert rows.returncode == 4, rows.stderr
