"""``maple embed`` on Mistral through the real wire: ``--provider mistral`` (batch jobs whose
``endpoint`` is ``/v1/embeddings``, lines of Mistral's embeddings body) and ``mistral-realtime``
(``POST /v1/embeddings``, several texts a request) against the emulator's Mistral routes: every
row, the same vectors both ways, each text billed once, booked by ``maple costs``; the same
command again sends nothing; a kill -9 after the create, then the same command, adopts the job;
``--dimensions`` on ``mistral-embed`` (one vector length only) is one line, exit 2, nothing
sent."""

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import one_line, table_job

ROWS = 12
MODEL = "codestral-embed"
DIMS = 8
MISTRAL: dict[str, Any] = {"clean": True, "drop": ("MISTRAL_",)}  # none of the caller's settings


def mistral(url: str) -> dict[str, str]:
    return {"MISTRAL_BASE_URL": url, "MISTRAL_API_KEY": "mistral-key"}


def jobs(url: str) -> list[dict[str, object]]:
    answer = httpx.get(
        f"{url}/v1/batch/jobs", headers={"Authorization": "Bearer mistral-key"}, timeout=10
    )
    return list(answer.json()["data"])


def job(where: Path, provider: str, *extra: str, model: str = MODEL) -> list[str]:
    args = table_job(where, "embed", provider, ROWS, "--poll-interval", "0.1", *extra)
    args[args.index("--model") + 1] = model
    return args


def vectors(where: Path) -> np.ndarray:
    out = pl.read_parquet(next(where.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    return np.asarray(out["llm_embedding"].to_list(), dtype=np.float32)


def booked(where: Path) -> dict[str, object]:
    shown = maple(
        "costs", "--storage", str(where / "store"), "--by", "job", "--format", "json", **MISTRAL
    )
    assert shown.returncode == 0, shown.stderr
    [row] = json.loads(shown.stdout)
    return dict(row)


@pytest.mark.slow  # two jobs, a batch one and a real-time one, and a rerun (about 12 s)
def test_batch_and_real_time_embed_on_mistral_give_the_same_vectors_billed_once(
    tmp_path: Path,
) -> None:
    batch, realtime = tmp_path / "batch", tmp_path / "realtime"
    batch.mkdir()
    realtime.mkdir()
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        env = mistral(server.url)
        args = job(batch, "mistral", "--dimensions", str(DIMS), "--max-requests-per-batch", "5")
        done = maple(*args, **MISTRAL, **env)
        first = server.stats()
        again = maple(*args, **MISTRAL, **env)  # the same command: every row is reused
        made = jobs(server.url)
        server.reset()
        live = maple(
            *job(realtime, "mistral-realtime", "--dimensions", str(DIMS)), **MISTRAL, **env
        )
        second = server.stats()
    assert done.returncode == 0, done.stderr
    assert again.returncode == 0, again.stderr
    assert live.returncode == 0, live.stderr
    assert vectors(batch).shape == (ROWS, DIMS)
    np.testing.assert_array_equal(vectors(batch), vectors(realtime))
    assert first["requests_billed"] == ROWS and first["bodies_billed_twice"] == 0
    assert first["batches_created"] == 3 == len(made)  # and none by the rerun
    assert {(j["status"], j["model"], j["endpoint"]) for j in made} == {
        ("SUCCESS", MODEL, "/v1/embeddings")
    }
    assert second["requests_billed"] == ROWS and second["batches_created"] == 0
    assert second["realtime_requests"] < ROWS  # several texts a request
    for where in (batch, realtime):
        out = pl.read_parquet(next(where.glob("items_*.parquet")))
        assert (out["llm_cost_usd"] > 0).all()  # genai-prices knows Mistral's embed models
        row = booked(where)
        assert row["requests"] == ROWS
        assert float(str(row["cost_usd"])) == pytest.approx(out["llm_cost_usd"].sum())


@pytest.mark.slow  # a kill -9 and a resume over 0.2 s batches (about 5 s)
def test_a_kill_9_after_the_create_then_the_same_command_adopts_the_embedding_job(
    tmp_path: Path,
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, control_fail=0)) as server:
        args = job(tmp_path, "mistral", "--max-requests-per-batch", "5")
        killed = maple(*args, **MISTRAL, **mistral(server.url), MAPLE_CRASH_AT="after_create")
        resumed = maple(*args, **MISTRAL, **mistral(server.url))
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert vectors(tmp_path).shape[0] == ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3  # the job created before the kill was adopted


@pytest.mark.parametrize("provider", ["mistral", "mistral-realtime"])
def test_dimensions_on_mistral_embed_is_one_line_and_exit_2_before_anything_is_sent(
    tmp_path: Path, provider: str
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, provider, "--dimensions", "256", model="mistral-embed")
        run = maple(*args, **MISTRAL, **mistral(server.url))
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert "--model mistral-embed makes vectors of one length only" in line, line
    assert "drop --dimensions 256" in line, line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0
