"""Hostile but realistic use, one class of problem per test, each through real subprocesses:
exit code, one line on stderr, no traceback. Grows with each class fixed."""

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from tests.e2e.cli import clean_env, maple
from tests.e2e.hostile import one_line

# A user's shell does not ignore SIGINT, whatever started pytest: restore Python's handler.
AS_A_SHELL_STARTS_IT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'maple'; runpy.run_module('maple_assets.cli', run_name='__main__')"
)


@pytest.mark.parametrize(
    "after_s",
    [
        0.2,
        1.0,
        3.0,
        pytest.param(6.0, marks=pytest.mark.slow),
        pytest.param(9.0, marks=pytest.mark.slow),
    ],
)
def test_ctrl_c_at_any_moment_of_start_up_is_one_line_and_130(
    tmp_path: Path, after_s: float
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["a", "b", "c"]}).write_csv(table)
    args = [sys.executable, "-c", AS_A_SHELL_STARTS_IT, "enrich", str(table)]
    args += ["--prompt", "About {title}", "--model", "gpt-4o-mini", "--provider", "emulator"]
    args += ["--storage", str(tmp_path / "store"), "--emulator-batch-seconds", "30", "--quiet"]
    process = subprocess.Popen(
        args, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert one_line(stderr).startswith("stopped"), stderr


@pytest.mark.parametrize("command", ["status", "cancel"])
def test_an_s3_root_without_credentials_is_one_line_exit_2(command: str) -> None:
    result = maple(
        command, "some-job", "--storage", "s3://maple-no-such-bucket/x", clean=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "no AWS credentials" in one_line(result.stderr)


def test_an_unreachable_ledger_is_one_line_exit_2() -> None:
    result = maple(
        "costs",
        "--db",
        "postgresql+psycopg2://maple:pw@127.0.0.1:1/ledger",
        clean=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert "the cost ledger's database did not answer" in line
    assert ":pw@" not in line  # the password never reaches the message


class _WrongService(BaseHTTPRequestHandler):
    """Not a provider API: an HTML page, or a key refused, by the path's first segment."""

    posts = 0

    def do_GET(self) -> None:
        if self.path.startswith("/refusing/"):
            self._answer(401, "application/json", b'{"error": {"message": "bad key"}}')
        elif self.path.startswith("/other-json/"):
            self._answer(200, "application/json", b'{"status": "ok", "service": "inventory"}')
        else:
            self._answer(200, "text/html", b"<html><body>Welcome</body></html>")

    def do_POST(self) -> None:
        type(self).posts += 1
        self._answer(200, "text/html", b"<html></html>")

    def _answer(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def wrong_service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WrongService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("/html/v1", "does not answer like the batch API (HTTP 200, text/html)"),
        ("/other-json/v1", "does not answer like the batch API (HTTP 200, application/json)"),
        ("/refusing/v1", "refused the API key (401): check OPENAI_API_KEY"),
        ("dead", "cannot be reached (ConnectError): check OPENAI_BASE_URL"),
    ],
)
def test_a_wrong_endpoint_is_one_line_exit_2_within_seconds(
    wrong_service: str, tmp_path: Path, where: str, message: str
) -> None:
    base = "http://127.0.0.1:1/v1" if where == "dead" else wrong_service + where
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["a", "b"]}).write_csv(table)
    env = clean_env(OPENAI_API_KEY="sk-test-key", OPENAI_BASE_URL=base)
    started = time.monotonic()
    args = ["enrich", str(table), "--prompt", "{title}", "--model", "gpt-4o-mini"]
    args += ["--provider", "openai", "--storage", str(tmp_path / "s")]
    result = subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert message in line and base.removesuffix("/v1") in line, line
    assert "sk-test-key" not in line
    assert time.monotonic() - started < 60  # not the 30-minute outage window
    assert _WrongService.posts == 0  # nothing uploaded


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--prompt", "   "], {}, "the prompt template is empty"),
        (["--emulator-fail", "bogus=2"], {}, "unknown fault class 'bogus'"),
        (["--emulator-fail", "refused=0.5"], {"MAPLE_EMULATOR_URL": "http://127.0.0.1:1"},
         "MAPLE_EMULATOR_URL points at a running one"),
    ],
)  # fmt: skip
def test_meaningless_or_ignored_settings_are_one_line_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": ["a"]}).write_csv(table)
    base = ["enrich", str(table), "--model", "gpt-4o-mini", "--provider", "emulator"]
    base += ["--storage", str(tmp_path / "s")]
    if "--prompt" not in args:
        base += ["--prompt", "About {title}"]
    result = subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *base, *args],
        capture_output=True, text=True, env=clean_env(**env), timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert message in one_line(result.stderr)


@pytest.mark.parametrize(
    ("content", "prompt", "message"),
    [
        (b"title\nok\ncaf\xe9 au lait\n", "About {title}",
         "line 3 is not valid UTF-8 (byte 0xe9"),
        (b"title\nok\n", 'Answer like {"brand": "x"} for {title}',
         'double its braces: {{"brand": "x"}}'),
    ],
)  # fmt: skip
def test_unreadable_input_or_template_names_where(
    tmp_path: Path, content: bytes, prompt: str, message: str
) -> None:
    table = tmp_path / "items.csv"
    table.write_bytes(content)
    result = maple(
        "enrich", str(table), "--prompt", prompt, "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(tmp_path / "s"), clean=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert message in one_line(result.stderr)
