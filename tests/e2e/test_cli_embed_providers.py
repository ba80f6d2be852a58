"""``maple embed`` on Gemini (batch and ``batchEmbedContents``) and Bedrock (Titan Text
Embeddings V2) as a user runs it, against the emulator over HTTP: the same vectors as the official
SDKs' real-time calls, one billed request per text, a rerun after an edit sending only the edited
rows, kill -9 then a resume paying nothing twice, and bad options refused before any upload."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import openai
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google import genai
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.conftest import BUCKET

MAPLE = str(Path(sys.executable).parent / "maple")
GEMINI_MODEL = "gemini-embedding-001"
TITAN = "amazon.titan-embed-text-v2:0"
DIMS = 8
ROWS = 12


def titles(rows: int = ROWS) -> list[str]:
    return [f"catalog item {i}" for i in range(rows - 1)] + ["catalog item 0"]  # one repeat


def make_table(path: Path, names: list[str]) -> Path:
    frame = pl.DataFrame({"sku": [f"S{i:03d}" for i in range(len(names))], "title": names})
    frame.write_parquet(path)
    return path


def command(table: Path, work: Path, provider: str, *extra: str) -> list[str]:
    return [
        MAPLE, "embed", str(table), "--text", "Product: {title}", "--model", GEMINI_MODEL,
        "--dimensions", str(DIMS), "--provider", provider, "--storage", str(work / "store"),
        "--job", "vectors", "--output", str(work / "out.parquet"),
        "--max-requests-per-batch", "5", "--poll-interval", "0.1", "--quiet", *extra,
    ]  # fmt: skip


def run(cmd: list[str], env: dict[str, str], crash: str | None = None) -> Any:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAPLE_CRASH")}
    clean |= env | ({"MAPLE_CRASH_AT": crash} if crash else {})
    return subprocess.run(
        cmd, env=clean, capture_output=True, text=True, timeout=240, check=False,
        start_new_session=True,
    )  # fmt: skip


def gemini_env(server: EmulatorServer) -> dict[str, str]:
    return {"GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "test-key"}


def emulator(**config: Any) -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(seed=5, batch_seconds=0.2, control_fail=0, **config))


def vectors(frame: pl.DataFrame) -> Any:
    return np.asarray(frame["llm_embedding"].to_list(), dtype=np.float32)


def test_gemini_batch_and_real_time_give_the_sdks_vectors(tmp_path: Path) -> None:
    table = make_table(tmp_path / "items.parquet", titles())
    with emulator() as server:
        env = gemini_env(server)
        batch = run(command(table, tmp_path / "batch", "gemini"), env)
        after_batch = server.stats()
        live = run(command(table, tmp_path / "live", "gemini-realtime"), env)
        after_live = server.stats()
        sdk = genai.Client(api_key="k", http_options={"base_url": server.url})
        reply = sdk.models.embed_content(
            model=GEMINI_MODEL,
            contents=["Product: catalog item 3"],
            config={"output_dimensionality": DIMS},
        )
    assert batch.returncode == 0, batch.stderr
    assert live.returncode == 0, live.stderr
    by_batch = pl.read_parquet(tmp_path / "batch" / "out.parquet")
    by_live = pl.read_parquet(tmp_path / "live" / "out.parquet")
    out = pq.read_schema(tmp_path / "batch" / "out.parquet")
    assert out.field("llm_embedding").type == pa.list_(pa.float32(), DIMS)
    assert by_batch["llm_status"].to_list() == ["succeeded"] * ROWS
    got = vectors(by_batch)
    assert reply.embeddings is not None
    assert np.array_equal(got[3], np.asarray(reply.embeddings[0].values, dtype=np.float32))
    assert np.array_equal(got, vectors(by_live))  # the same vector through batch and real time
    assert np.array_equal(got[0], got[-1])
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # one billed text per distinct row, in each run; real time: one request per shard of <= 5
    assert after_batch["requests_billed"] == ROWS - 1
    assert after_live["requests_billed"] - after_batch["requests_billed"] == ROWS - 1
    assert after_live["realtime_requests"] - after_batch["realtime_requests"] == 3
    assert after_live["bodies_billed_twice"] == 0
    for frame in (by_batch, by_live):
        assert frame["llm_input_tokens"].min() > 0  # type: ignore[operator]
        assert frame["llm_model"].unique().to_list() == [GEMINI_MODEL]
    # the batch is billed at half the real-time price for the same tokens
    assert by_batch["llm_input_tokens"].sum() == by_live["llm_input_tokens"].sum()
    ratio = by_batch["llm_cost_usd"].sum() / by_live["llm_cost_usd"].sum()
    assert ratio == pytest.approx(0.5)


@pytest.mark.parametrize(
    "provider",
    # the OpenAI rerun case stays in the default suite (test_cli_embed.py); these in the long pass
    [
        pytest.param("gemini", marks=pytest.mark.slow),
        pytest.param("gemini-realtime", marks=pytest.mark.slow),
    ],
)
def test_a_gemini_rerun_after_editing_rows_sends_only_those(tmp_path: Path, provider: str) -> None:
    table = make_table(tmp_path / "items.parquet", titles())
    with emulator() as server:
        env = gemini_env(server)
        first = run(command(table, tmp_path, provider), env)
        before = pl.read_parquet(tmp_path / "out.parquet")
        edited = titles()
        edited[2], edited[7] = "catalog item two, edited", "a new seventh item"
        make_table(table, edited)
        billed = server.stats()["requests_billed"]
        second = run(command(table, tmp_path, provider), env)
        stats = server.stats()
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert stats["requests_billed"] - billed == 2
    after = pl.read_parquet(tmp_path / "out.parquet")
    old, new = before["llm_embedding"].to_list(), after["llm_embedding"].to_list()
    assert [i for i in range(ROWS) if old[i] != new[i]] == [2, 7]
    assert after["llm_reused"].to_list() == [i not in (2, 7) for i in range(ROWS)]


@pytest.mark.slow  # ~40 s each: in the long-running pass with the other kill -9 points
def test_gemini_kill_9_after_create_then_resume_pays_nothing_twice(tmp_path: Path) -> None:
    base, crash = tmp_path / "base", tmp_path / "crash"
    base.mkdir()
    crash.mkdir()
    faults = {"rate_limited": 0.2}
    with emulator(fail=faults) as server:
        table = make_table(base / "items.parquet", titles())
        assert run(command(table, base, "gemini"), gemini_env(server)).returncode == 0
        expected = server.stats()
    with emulator(fail=faults) as server:
        table = make_table(crash / "items.parquet", titles())
        killed = run(command(table, crash, "gemini"), gemini_env(server), "after_create")
        resumed = run(command(table, crash, "gemini"), gemini_env(server))
        stats = server.stats()
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    # the batch created just before the kill is adopted, not created again
    assert stats["batches_created"] == expected["batches_created"]
    assert stats["requests_billed"] == expected["requests_billed"]
    assert stats["bodies_billed_twice"] == 0
    got = pl.read_parquet(crash / "out.parquet").drop("llm_batch_id")
    assert_frame_equal(got, pl.read_parquet(base / "out.parquet").drop("llm_batch_id"))


def bedrock_command(table: Path, work: Path, *extra: str) -> list[str]:
    cmd = command(table, work, "bedrock", "--dimensions", "256", *extra)
    cmd[cmd.index("--model") + 1] = TITAN
    cmd[cmd.index("--storage") + 1] = f"s3://{BUCKET}/{work.name}"  # conftest's bucket
    cmd[cmd.index("--max-requests-per-batch") + 1] = "100"  # Bedrock's minimum job
    return cmd


@pytest.mark.slow  # ~40 s each: in the long-running pass with the other kill -9 points
def test_bedrock_titan_kill_9_then_resume_gives_the_real_time_vectors(
    tmp_path: Path, s3: dict[str, str]
) -> None:
    rows = 200
    names = [f"thing {i}" for i in range(rows)]
    table = make_table(tmp_path / "items.parquet", names)
    s3_url = s3["AWS_ENDPOINT_URL"]
    config = EmulatorConfig(batch_seconds=0.3, s3_endpoint=s3_url, control_fail=0)
    with EmulatorServer(config) as server:
        env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_BEDROCK": server.url}
        env["MAPLE_BEDROCK_ROLE_ARN"] = "arn:aws:iam::123456789012:role/maple"
        bad_dims = bedrock_command(table, tmp_path, "--dimensions", "300")
        refused = run(bad_dims, env)
        bad_model = bedrock_command(table, tmp_path)
        bad_model[bad_model.index("--model") + 1] = "amazon.titan-embed-text-v1"
        wrong = run(bad_model, env)
        untouched = server.stats()
        killed = run(bedrock_command(table, tmp_path), env, "after_create")
        resumed = run(bedrock_command(table, tmp_path), env)
        stats = server.stats()
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k")
        live = sdk.embeddings.create(model="text-embedding-3-small", input="Product: thing 7",
                                     dimensions=256)  # fmt: skip
    assert refused.returncode == 2 and "256, 512 or 1024 dimensions, not 300" in refused.stderr
    assert wrong.returncode == 2 and "Titan Text Embeddings V2" in wrong.stderr, wrong.stderr
    assert untouched["batches_created"] == 0 and untouched["requests_billed"] == 0
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert stats["batches_created"] == 2  # two shards of 100; the one created before the kill
    assert stats["requests_billed"] == rows and stats["bodies_billed_twice"] == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * rows
    got = vectors(out)
    assert got.shape == (rows, 256)
    # the emulator's one embedding function: Titan's vector is OpenAI's for the same text
    assert np.array_equal(got[7], np.asarray(live.data[0].embedding, dtype=np.float32))
    assert out["llm_input_tokens"].to_list()[7] == live.usage.prompt_tokens
    assert out["llm_cost_usd"].sum() > 0


def test_a_text_over_geminis_input_limit_is_named_in_pre_flight(tmp_path: Path) -> None:
    table = make_table(tmp_path / "items.parquet", ["short", "word " * 2000])  # ~2,500 tokens
    with emulator() as server:
        done = run(command(table, tmp_path, "gemini"), gemini_env(server))
        stats = server.stats()
    assert done.returncode == 2, done.stderr
    assert "Row 1's text to embed" in done.stderr and "input limit of 2,048" in done.stderr
    assert stats["files_uploaded"] == 0 and stats["batches_created"] == 0
