"""LiteLLM's proxy, the real program (``litellm[proxy]`` pinned in ``.ci/run``), between
``maple`` and the emulator: its files and batches passed through to the emulator as an OpenAI
provider (no database), its chat completions and embeddings routed there by model. A batch job
(``--provider openai-compatible --base-url`` the proxy), a real-time job (``openai-realtime
--base-url``) and embedding jobs of both kinds run to their end, every row billed once and
booked by ``maple costs``; a kill -9 mid-job, then the same command, adopts the batch through
the proxy's listing and pays nothing twice."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.gateway_programs import LITELLM_KEY, litellm_proxy
from tests.e2e.hostile import table_job

pytestmark = pytest.mark.slow  # starts LiteLLM's proxy (about 10 s) once per module and worker
ROWS = 12


@pytest.fixture(scope="module")
def through(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatorServer, str]]:
    """The emulator, and the base URL of LiteLLM's proxy in front of it."""
    config = EmulatorConfig(batch_seconds=0.2, control_fail=0)
    with (
        EmulatorServer(config) as server,
        litellm_proxy(server.url, tmp_path_factory.mktemp("litellm")) as base,
    ):
        yield server, base


def run(
    base: str, tmp_path: Path, command: str, provider: str, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    args = table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1",
                     "--base-url", base, *extra)  # fmt: skip
    keys = {"MAPLE_API_KEY": LITELLM_KEY, "OPENAI_API_KEY": LITELLM_KEY}
    return maple(*args, clean=True, **keys, **env)


def booked(tmp_path: Path) -> list[dict[str, object]]:
    shown = maple(
        "costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json", clean=True
    )
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout))


@pytest.mark.parametrize(
    ("command", "provider"),
    [("enrich", "openai-compatible"), ("enrich", "openai-realtime"),
     ("embed", "openai-compatible"), ("embed", "openai-realtime")],
)  # fmt: skip
def test_a_job_through_litellms_proxy_runs_to_its_end_billed_once_and_booked(
    through: tuple[EmulatorServer, str], tmp_path: Path, command: str, provider: str
) -> None:
    server, base = through
    server.reset()
    done = run(base, tmp_path, command, provider, "--max-requests-per-batch", "5")
    stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert (out["llm_input_tokens"] > 0).all()
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    if provider == "openai-compatible":
        assert stats["batches_created"] == 3  # the proxy's files and batches, passed through
    else:
        assert stats["batches_created"] == 0 and stats["realtime_requests"] > 0
    [row] = booked(tmp_path)
    assert row["job"] == "hostile" and row["requests"] == ROWS


@pytest.mark.parametrize("point", ["after_create", "mid_download"])
def test_a_kill_9_then_the_same_command_through_the_proxy_pays_nothing_twice(
    through: tuple[EmulatorServer, str], tmp_path: Path, point: str
) -> None:
    server, base = through
    server.reset()
    extra = ("--max-requests-per-batch", "5")
    killed = run(base, tmp_path, "enrich", "openai-compatible", *extra, MAPLE_CRASH_AT=point)
    resumed = run(base, tmp_path, "enrich", "openai-compatible", *extra)
    stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3  # the batch created before the kill was adopted
    [row] = booked(tmp_path)
    assert row["requests"] == ROWS
