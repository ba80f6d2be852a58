"""``maple embed`` as a user runs it, against the emulator over HTTP: vectors as Arrow
``fixed_size_list<float32>[dim]`` in Parquet, the same vector as the official SDK's real-time
call, empty texts not sent, bad inputs refused before anything is uploaded, a rerun after an edit
sending only the edited rows, and kill -9 at the durable steps then a resume paying nothing twice.
"""

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
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

MAPLE = str(Path(sys.executable).parent / "maple")
MODEL = "text-embedding-3-small"
DIMS = 8
ROWS = 12


def titles() -> list[str]:
    return [f"catalog item {i}" for i in range(ROWS - 1)] + ["catalog item 0"]  # one repeat


def make_table(path: Path, names: list[str] | None = None) -> Path:
    names = names if names is not None else titles()
    pl.DataFrame({"sku": [f"S{i:03d}" for i in range(len(names))], "title": names}).write_parquet(
        path
    )
    return path


def command(table: Path, work: Path, *extra: str) -> list[str]:
    return [
        MAPLE, "embed", str(table), "--text", "Product: {title}", "--model", MODEL,
        "--dimensions", str(DIMS), "--provider", "emulator", "--storage", str(work / "store"),
        "--job", "vectors", "--output", str(work / "out.parquet"),
        "--max-requests-per-batch", "5", "--poll-interval", "0.1", "--quiet", *extra,
    ]  # fmt: skip


def run(cmd: list[str], server: EmulatorServer, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAPLE_CRASH")}
    return subprocess.run(
        cmd, env={**clean, "MAPLE_EMULATOR_URL": server.url, **env}, capture_output=True,
        text=True, timeout=240, check=False, start_new_session=True,
    )  # fmt: skip


def emulator() -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(seed=5, batch_seconds=0.2, control_fail=0))


def test_vectors_are_fixed_size_float32_lists_equal_to_the_sdks(tmp_path: Path) -> None:
    table = make_table(tmp_path / "items.parquet")
    with emulator() as server:
        done = run(command(table, tmp_path), server)
        stats = server.stats()
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k")
        live = sdk.embeddings.create(model=MODEL, input="Product: catalog item 3", dimensions=DIMS)
    assert done.returncode == 0, done.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.schema.field("llm_embedding").type == pa.list_(pa.float32(), DIMS)
    assert out.column_names[:3] == ["sku", "title", "llm_embedding"]
    assert "llm_response" not in out.column_names
    frame = pl.from_arrow(out)
    assert isinstance(frame, pl.DataFrame)
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    vectors = np.asarray(frame["llm_embedding"].to_list(), dtype=np.float32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[3], np.asarray(live.data[0].embedding, dtype=np.float32))
    assert np.array_equal(vectors[0], vectors[-1])  # the repeated title: the same vector
    assert len({v.tobytes() for v in vectors}) == ROWS - 1
    # one billed input per distinct text (the repeat is filled from the first), none twice
    assert stats["requests_billed"] == ROWS - 1 and stats["bodies_billed_twice"] == 0
    assert frame["llm_input_tokens"].min() > 0  # type: ignore[operator]
    assert frame["llm_cost_usd"].sum() > 0
    assert frame["llm_reused"].sum() == 1


def test_an_empty_text_is_not_sent_and_says_so(tmp_path: Path) -> None:
    names = ["red shirt", "", "   ", "green hat"]
    table = tmp_path / "items.parquet"
    pl.DataFrame({"sku": list("abcd"), "title": names}).write_parquet(table)
    cmd = command(table, tmp_path)
    cmd[cmd.index("--text") + 1] = "{title}"
    with emulator() as server:
        done = run(cmd, server)
        stats = server.stats()
    assert done.returncode == 3, done.stderr  # some rows have no vector
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame["llm_status"].to_list() == ["succeeded", "failed", "failed", "succeeded"]
    assert frame["llm_failure_class"].to_list() == [None, "empty_text", "empty_text", None]
    assert frame["llm_embedding"].is_null().to_list() == [False, True, True, False]
    assert frame["llm_cost_usd"].to_list()[1:3] == [0.0, 0.0]
    assert stats["requests_billed"] == 2
    assert "empty_text" in done.stdout
    assert "cache" not in done.stdout  # an embedding has no prompt cache: no cache lines
    with emulator() as server:
        dry = run([*cmd, "--dry-run"], server)
    assert "2 with an empty text: never sent" in dry.stdout, dry.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--output", "out.csv"), "must be Parquet"),
        (("--provider", "anthropic"), "'anthropic' is not one of"),
    ],
)
def test_bad_options_are_refused_before_anything_is_sent(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    table = make_table(tmp_path / "items.parquet")
    cmd = command(table, tmp_path)
    flag, value = change
    cmd[cmd.index(flag) + 1] = str(tmp_path / value) if flag == "--output" else value
    with emulator() as server:
        done = run(cmd, server)
        stats = server.stats()
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert stats["files_uploaded"] == 0


def test_an_over_long_text_is_named_in_pre_flight(tmp_path: Path) -> None:
    names = ["short", "word " * 9000]  # about 11,250 tokens: over the model's 8,192
    table = make_table(tmp_path / "items.parquet", names)
    with emulator() as server:
        done = run(command(table, tmp_path), server)
        stats = server.stats()
    assert done.returncode == 2, done.stderr
    assert "Row 1's text to embed" in done.stderr and "input limit of 8,192" in done.stderr
    assert stats["files_uploaded"] == 0 and stats["requests_billed"] == 0


@pytest.mark.slow
def test_a_rerun_after_editing_rows_sends_only_those(tmp_path: Path) -> None:
    table = make_table(tmp_path / "items.parquet")
    with emulator() as server:
        first = run(command(table, tmp_path), server)
        before = pl.read_parquet(tmp_path / "out.parquet")
        edited = titles()
        edited[2], edited[7] = "catalog item two, edited", "a new seventh item"
        make_table(table, edited)
        billed = server.stats()["requests_billed"]
        second = run(command(table, tmp_path), server)
        stats = server.stats()
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert stats["requests_billed"] - billed == 2
    after = pl.read_parquet(tmp_path / "out.parquet")
    old, new = before["llm_embedding"].to_list(), after["llm_embedding"].to_list()
    changed = [i for i in range(ROWS) if old[i] != new[i]]
    assert changed == [2, 7]
    assert after["llm_reused"].to_list() == [i not in (2, 7) for i in range(ROWS)]


@pytest.mark.parametrize(
    "point",
    [
        "after_upload",
        # the other crash points take 25-75 s each: the long-running pass
        *(
            pytest.param(p, marks=pytest.mark.slow)
            for p in ("after_create", "mid_download", "mid_merge")
        ),
    ],
)
def test_kill_9_then_resume_pays_nothing_twice(tmp_path: Path, point: str) -> None:
    base, crash = tmp_path / "base", tmp_path / "crash"
    base.mkdir()
    crash.mkdir()
    with emulator() as server:
        assert run(command(make_table(base / "items.parquet"), base), server).returncode == 0
        expected = server.stats()["requests_billed"]
    with emulator() as server:
        table = make_table(crash / "items.parquet")
        killed = run(command(table, crash), server, MAPLE_CRASH_AT=point)
        resumed = run(command(table, crash), server)
        stats = server.stats()
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == expected
    assert_frame_equal(comparable(crash), comparable(base))


def comparable(work: Path) -> Any:
    return pl.read_parquet(work / "out.parquet").drop("llm_batch_id")


@pytest.mark.slow  # about 3 minutes on 2 cores
def test_realtime_sends_several_texts_per_request_with_the_batch_vectors(tmp_path: Path) -> None:
    names = [f"catalog item {i}" for i in range(250)]
    table = make_table(tmp_path / "items.parquet", names)

    def realtime(work: Path, server: EmulatorServer, **env: str) -> Any:
        cmd = command(table, work)
        cmd[cmd.index("--provider") + 1] = "openai-realtime"
        cmd[cmd.index("--max-requests-per-batch") + 1] = "1000"  # one shard: 3 requests
        return run(cmd, server, OPENAI_BASE_URL=f"{server.url}/v1", OPENAI_API_KEY="k", **env)

    with emulator() as server:
        batch = run(command(table, tmp_path / "batch"), server)
        before = server.stats()
        live = realtime(tmp_path / "live", server)
        after = server.stats()
    assert batch.returncode == live.returncode == 0, live.stderr
    # 250 texts in ceil(250 / 100) requests; one billed input per text
    assert after["realtime_requests"] - before["realtime_requests"] == 3
    assert after["requests_billed"] - before["requests_billed"] == 250
    by_batch = pl.read_parquet(tmp_path / "batch" / "out.parquet")
    by_live = pl.read_parquet(tmp_path / "live" / "out.parquet")
    assert by_live["llm_embedding"].to_list() == by_batch["llm_embedding"].to_list()
    assert by_live["llm_input_tokens"].sum() == by_batch["llm_input_tokens"].sum()
    with emulator() as server:  # killed after its results, then resumed: nothing sent again
        killed = realtime(tmp_path / "crash", server, MAPLE_CRASH_AT="after_results")
        resumed = realtime(tmp_path / "crash", server)
        stats = server.stats()
    assert killed.returncode == -signal.SIGKILL and resumed.returncode == 0, resumed.stderr
    assert stats["requests_billed"] == 250 and stats["bodies_billed_twice"] == 0
    resumed_out = pl.read_parquet(tmp_path / "crash" / "out.parquet")
    assert resumed_out["llm_embedding"].to_list() == by_batch["llm_embedding"].to_list()
