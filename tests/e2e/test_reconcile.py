"""``maple reconcile`` as a user runs it: a real ``maple enrich`` against the emulator, then the
ledger against the emulator's admin usage and cost reports; spend from another key of the same
organisation is drift (exit 3 naming the day and model), another organisation's is not."""

import http.server
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import NO_OPENAI_KEY, maple

ADMIN = "sk-admin-reconcile"
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatorServer, Path]]:
    """One emulator; an OpenAI and an Anthropic job billed through it by ``maple enrich``."""
    tmp = tmp_path_factory.mktemp("reconcile")
    table = tmp / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(16)]}).write_csv(table)
    config = EmulatorConfig(batch_seconds=0.5, organizations={"sk-elsewhere": "org-other"})
    with EmulatorServer(config) as server:
        for provider, model in MODELS.items():
            done = maple(
                "enrich", str(table), "--prompt", "Name {title}", "--model", model,
                "--provider", provider, "--storage", str(tmp / "store"), "--job", provider,
                "--output", str(tmp / f"{provider}.csv"), "--max-requests-per-batch", "8",
                "--poll-interval", "0.1", "--quiet", drop=NO_OPENAI_KEY, **_env(server),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        yield server, tmp / "store"


def _env(server: EmulatorServer, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": "sk-maple",
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-maple",
        **extra,
    }


def _reconcile(server: EmulatorServer, store: Path, *args: str, **env: str) -> Any:
    return maple(
        "reconcile", "--storage", str(store), *args, drop=NO_OPENAI_KEY, **_env(server, **env)
    )


def _spend(server: EmulatorServer, key: str, model: str, chars: int) -> None:
    """A real-time call from a client that is not maple (another key)."""
    body = {"model": model, "messages": [{"role": "user", "content": "x" * chars}]}
    headers = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers)
    assert answer.status_code == 200, answer.text


def test_the_ledger_matches_both_providers_bills(setup: tuple[EmulatorServer, Path]) -> None:
    server, store = setup
    today = datetime.now(UTC).date().isoformat()
    for provider, key in (("openai", ADMIN), ("anthropic", "sk-ant-admin01-reconcile")):
        admin = {f"{provider.upper()}_ADMIN_KEY": key}
        out = _reconcile(server, store, "--provider", provider, **admin)
        assert out.returncode == 0, out.stdout + out.stderr
        header, _rule, *rows = out.stdout.splitlines()
        assert header.split()[:2] == ["day", "model"]
        assert len(rows) == 1
        day, model, ledger_tokens, provider_tokens, ledger_usd, provider_usd, *_, verdict = rows[
            0
        ].split()
        assert (day, model, verdict) == (today, MODELS[provider], "ok")
        assert ledger_tokens == provider_tokens and ledger_tokens != "0/0"
        assert float(ledger_usd) == pytest.approx(float(provider_usd), rel=0.01)
        assert float(ledger_usd) > 0


def test_admin_keys_are_required(setup: tuple[EmulatorServer, Path]) -> None:
    server, store = setup
    missing = _reconcile(server, store, "--provider", "openai")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [missing.stderr.strip()]
    assert "OPENAI_ADMIN_KEY is not set" in missing.stderr
    api_key = _reconcile(server, store, "--provider", "anthropic", ANTHROPIC_ADMIN_KEY="sk-ant-x")
    assert api_key.returncode == 2
    assert "refused ANTHROPIC_ADMIN_KEY (HTTP 401)" in api_key.stderr
    assert "sk-ant-x" not in api_key.stderr
    plain = _reconcile(server, store, "--provider", "openai", OPENAI_ADMIN_KEY="sk-plain")
    assert plain.returncode == 2 and "refused OPENAI_ADMIN_KEY (HTTP 403)" in plain.stderr
    swapped = _reconcile(
        server, store, "--provider", "openai", "--since", "2026-02-02", "--until", "2026-02-01",
        OPENAI_ADMIN_KEY=ADMIN,
    )  # fmt: skip
    assert swapped.returncode == 2 and "swap them" in swapped.stderr


def test_spend_from_another_key_of_the_organisation_is_drift(
    setup: tuple[EmulatorServer, Path],
) -> None:
    server, store = setup
    today = datetime.now(UTC).date().isoformat()
    _spend(server, "sk-elsewhere", "gpt-4o-mini", 200_000)  # another organisation's bill
    calm = _reconcile(server, store, "--provider", "openai", OPENAI_ADMIN_KEY=ADMIN)
    assert calm.returncode == 0, calm.stdout + calm.stderr

    _spend(server, "sk-colleague", "gpt-4o-mini", 200_000)  # ~$0.03: past both tolerances
    drift = _reconcile(server, store, "--provider", "openai", OPENAI_ADMIN_KEY=ADMIN)
    assert drift.returncode == 3, drift.stdout + drift.stderr
    lines = drift.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"drift: {today} gpt-4o-mini: ledger $")
    assert "DRIFT" in drift.stdout

    loose = _reconcile(
        server, store, "--provider", "openai", "--tolerance-usd", "1", OPENAI_ADMIN_KEY=ADMIN
    )
    assert loose.returncode == 0, loose.stderr  # within $1, so within tolerance
    other_days = _reconcile(
        server, store, "--provider", "openai", "--since", "2026-01-01", "--until", "2026-01-31",
        OPENAI_ADMIN_KEY=ADMIN,
    )  # fmt: skip
    assert other_days.returncode == 0 and "No spend" in other_days.stdout


@pytest.fixture
def not_a_report() -> Iterator[str]:
    """A web server that is not the provider's API: every path a 200 HTML page."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Welcome</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_wrong_or_dead_report_url_is_one_line_within_seconds(
    setup: tuple[EmulatorServer, Path], not_a_report: str, provider: str
) -> None:
    server, store = setup
    admin = {f"{provider.upper()}_ADMIN_KEY": ADMIN}
    for url, says in (
        (not_a_report, "does not answer like a usage report (HTTP 200, text/html)"),
        ("http://127.0.0.1:9", "cannot be read as a usage report (ConnectError)"),
    ):
        base = {f"{provider.upper()}_BASE_URL": url + ("/v1" if provider == "openai" else "")}
        started = time.monotonic()
        out = _reconcile(server, store, "--provider", provider, **admin, **base)
        assert out.returncode == 2, out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert line.startswith("error: ") and says in line, line
        assert f"check {provider.upper()}_BASE_URL" in line
        assert time.monotonic() - started < 20  # not the 30-minute outage window
