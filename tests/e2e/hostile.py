"""What the hostile-case tests share: ``maple`` run as a user runs it (a subprocess, with none
of the developer's AWS or ``MAPLE_`` settings), at a provider URL, and its stderr read as one
line."""

import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Any

import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.gateway import gateway

#: The notices a provider call that retries writes while it retries (not the job's outcome)
RETRYING = (
    "maple: real-time requests retrying: ",
    "maple: provider call retrying: ",
    "maple: retrying ",
)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def outcome_line(stderr: str) -> str:
    """The one line that says how the job ended, besides the notices of retries."""
    return one_line(
        "\n".join(line for line in stderr.splitlines() if not line.startswith(RETRYING))
    )


def retrying_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(RETRYING)]


def maple_at(
    base_url: str, *args: str, timeout: float = 120, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``maple ARGS`` with the OpenAI settings pointing at ``base_url`` (``/v1`` appended),
    and how long it took in seconds."""
    settings = {"OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_API_KEY": "sk-hostile-test-key"}
    started = time.monotonic()
    result = maple(*args, clean=True, timeout=timeout, **(settings | env))
    return result, time.monotonic() - started


def table_job(tmp_path: Path, command: str, provider: str, rows: int, *extra: str) -> list[str]:
    """The arguments of a ``maple enrich`` (chat) or ``maple embed`` job of ``rows`` titles."""
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(rows)]}).write_parquet(table)
    if command == "embed":
        what = ["--text", "{title}", "--model", "text-embedding-3-small"]
    else:
        what = ["--prompt", "About {title}", "--model", "gpt-4o-mini"]
    where = ["--storage", str(tmp_path / "store"), "--job", "hostile", "--quiet"]
    return [command, str(table), *what, "--provider", provider, *where, *extra]


@dataclasses.dataclass
class BeforeAfterFix:
    """A job run through a misbehaving gateway, then again once the gateway forwards."""

    url: str  # the gateway's
    broken: subprocess.CompletedProcess[str]
    took: float  # seconds the broken run took
    before: dict[str, Any]  # the emulator's counters after the broken run
    fixed: subprocess.CompletedProcess[str]
    after: dict[str, Any]  # and after the fixed one


def before_and_after_fix(mode: str, args: list[str]) -> BeforeAfterFix:
    config = EmulatorConfig(batch_seconds=0, control_fail=0)
    with EmulatorServer(config) as server, gateway(server.url, mode) as (gate, url):
        broken, took = maple_at(url, *args)
        before = server.stats()
        gate.mode = "forward"  # the gateway fixed
        fixed, _ = maple_at(url, *args)
        return BeforeAfterFix(url, broken, took, before, fixed, server.stats())
