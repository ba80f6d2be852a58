"""``maple enrich --distill`` as a user runs it, on the emulator over HTTP: a classification
answered mostly by the classifier where the labels follow a rule (``--label-rule keywords``),
the gate refusing where they do not, reruns and kill -9 paying for nothing twice."""

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.crashpoints import DISTILL_POINTS
from tests.e2e.cli import maple
from tests.e2e.distill_table import PROMPT, SYSTEM, rule_label, write_items, write_schema


@contextmanager
def emulator(rule: str = "keywords") -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, label_rule=rule)) as server:
        yield server


def enrich(
    work: Path, server: EmulatorServer, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return maple(
        "enrich", str(work / "items.parquet"), "--prompt", PROMPT, "--system", SYSTEM,
        "--model", "gpt-4o-mini", "--provider", "emulator", "--job", "items",
        "--response-schema", str(work / "schema.json"), "--output", str(work / "out.parquet"),
        "--distill", "--quiet", *extra,
        url=server.url, cwd=work, MAPLE_STORAGE=str(work / "store"), **env,
    )  # fmt: skip


def table(work: Path, rows: int) -> Path:
    write_schema(work / "schema.json")
    return write_items(work / "items.parquet", rows)


def agreement_with_the_rule(work: Path) -> float:
    out = pl.read_parquet(work / "out.parquet")
    labels = out["llm_parsed"].struct.field("aisle").to_list()
    rule = [rule_label(title) for title in out["title"]]
    return sum(a == b for a, b in zip(labels, rule, strict=True)) / out.height


def test_a_schema_that_is_not_one_label_is_refused_before_spend(tmp_path: Path) -> None:
    table(tmp_path, 30)
    (tmp_path / "schema.json").write_text(
        '{"type": "object", "properties": {"brand": {"type": "string"}}, "required": ["brand"],'
        ' "additionalProperties": false}'
    )
    with emulator() as server:
        refused = enrich(tmp_path, server)
        stats = server.stats()
    assert refused.returncode == 2, refused.stderr[-2000:]
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--distill needs a --response-schema of one enum" in lines[0]
    assert "'brand' is neither an enum" in lines[0]
    assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0


def test_the_dry_run_estimates_with_and_without_distillation(tmp_path: Path) -> None:
    table(tmp_path, 500)
    with emulator() as server:
        dry = enrich(tmp_path, server, "--distill-sample", "100", "--dry-run")
        stats = server.stats()
    assert dry.returncode == 0, dry.stderr[-2000:]
    lines = {line[:15].strip(): line[15:] for line in dry.stdout.splitlines()}
    assert "embeddings ~" in lines["with --distill"] and "100-row sample" in lines["with --distill"]
    assert "every row through the LLM" in lines["without"]
    least, most = (float(v) for v in re.findall(r"~([0-9.]+) ", lines["with --distill"])[:2])
    without = float(re.search(r"~([0-9.]+) USD", lines["without"]).group(1))  # type: ignore[union-attr]
    assert least < without < most
    assert stats["requests_received"] == 0


@pytest.mark.slow  # about 10 s on 2 cores
def test_a_budget_the_embeddings_exceed_stops_the_job_before_any_llm_spend(
    tmp_path: Path,
) -> None:
    table(tmp_path, 200)
    with emulator() as server:
        stopped = enrich(tmp_path, server, "--budget", "0")
        stats = server.stats()
    assert stopped.returncode == 4, stopped.stderr[-2000:]
    assert "stopped:" in stopped.stderr and "distill:" not in stopped.stderr
    assert stats["requests_billed"] == 0


@pytest.mark.slow  # about 45 s on 2 cores
def test_distill_answers_most_of_20000_rows_without_the_llm(tmp_path: Path) -> None:
    table(tmp_path, 20_000)
    with emulator() as server:
        done = enrich(tmp_path, server)
        first = server.stats()
        again = enrich(tmp_path, server)
        rerun = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    assert first["chat_requests_billed"] <= 0.25 * 20_000
    assert first["embedding_inputs_billed"] == 20_000
    assert agreement_with_the_rule(tmp_path) >= 0.95
    out = pl.read_parquet(tmp_path / "out.parquet")
    distilled = out.filter(pl.col("llm_source") == "distilled")
    assert distilled.height == 20_000 - first["chat_requests_billed"]
    assert distilled["llm_model"].str.starts_with("logreg-").all()
    assert distilled["llm_cost_usd"].sum() == 0 and distilled["llm_confidence"].min() > 0
    assert "distilled" in done.stdout and "held-out sample rows" in done.stdout
    assert "estimated for every row through the LLM" in done.stdout
    assert again.returncode == 0, again.stderr[-2000:]
    assert rerun["requests_billed"] == first["requests_billed"]  # the rerun paid nothing
    assert_frame_equal(pl.read_parquet(tmp_path / "out.parquet"), out)
    costs = maple("costs", "--by", "job", MAPLE_STORAGE=str(tmp_path / "store"))
    assert costs.returncode == 0, costs.stderr[-2000:]
    section = costs.stdout.split("distilled job", 1)[1].splitlines()
    row = next(line for line in section if line.startswith("items ")).split()
    assert row[1:3] == ["20,000", f"{distilled.height:,}"] and row[3].endswith("%")
    assert "every_row_usd" in costs.stdout
    # one job: both jobs' sum, then each job's row (the embeddings booked under the job)
    jobs = [line.split()[0] for line in costs.stdout.split("distilled job", 1)[0].splitlines()[2:5]]
    assert jobs == ["items", "llm", "embeddings"] and "items-embeddings" not in costs.stdout


@pytest.mark.slow  # about 20 s on 2 cores
def test_the_python_api_returns_the_distillations_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import maple_assets

    path = table(tmp_path, 2000)
    with emulator() as server:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
        result = maple_assets.enrich(
            str(path), prompt=PROMPT, system=SYSTEM, model="gpt-4o-mini", provider="emulator",
            job="items", response_schema=str(tmp_path / "schema.json"), distill=True,
            distill_sample=400, storage=str(tmp_path / "store"),
            output=str(tmp_path / "out.parquet"),
        )  # fmt: skip
        billed = server.stats()["chat_requests_billed"]
    assert result.status == "succeeded" and result.rows == 2000
    figures = result.metadata()["distill"]
    assert figures["distilled"] == 2000 - billed and figures["held_out"] == 120
    assert figures["agreement"] >= 0.9 and figures["refused"] == ""


@pytest.mark.slow  # about 40 s on 2 cores
def test_an_edited_row_is_embedded_and_scored_again_not_relabelled(tmp_path: Path) -> None:
    path = table(tmp_path, 3000)
    with emulator() as server:
        assert enrich(tmp_path, server, "--distill-sample", "600").returncode == 0
        before = server.stats()
        items = pl.read_parquet(path)
        edited = [f"dairy z{i}" if i < 20 else t for i, t in enumerate(items["title"])]
        items.with_columns(pl.Series("title", edited)).write_parquet(path)
        rerun = enrich(tmp_path, server, "--distill-sample", "600")
        after = server.stats()
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert after["embedding_inputs_billed"] - before["embedding_inputs_billed"] == 20
    assert after["chat_requests_billed"] - before["chat_requests_billed"] <= 20
    assert after["bodies_billed_twice"] == 0
    out = pl.read_parquet(tmp_path / "out.parquet").head(20)
    assert out["llm_parsed"].struct.field("aisle").to_list() == ["dairy"] * 20


@pytest.mark.slow  # about 20 s on 2 cores
def test_without_a_learnable_rule_the_gate_sends_every_row_to_the_llm(tmp_path: Path) -> None:
    table(tmp_path, 2000)
    with emulator(rule="first") as server:
        done = enrich(tmp_path, server, "--distill-sample", "400")
        stats = server.stats()
    assert done.returncode == 0, done.stderr[-2000:]
    gate = [line for line in done.stderr.splitlines() if line.startswith("distill:")]
    assert len(gate) == 1 and "not distilling" in gate[0] and "every row goes to the LLM" in gate[0]
    assert stats["chat_requests_billed"] == 2000
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_source"].unique().to_list() == ["llm"]


@pytest.mark.slow  # 45-85 s a point on 2 cores
@pytest.mark.parametrize("point", ["after_create", *DISTILL_POINTS])
def test_kill_9_at_a_stage_then_rerun_pays_nothing_twice(tmp_path: Path, point: str) -> None:
    base, crash = tmp_path / "base", tmp_path / "crash"
    base.mkdir()
    crash.mkdir()
    table(base, 2000)
    table(crash, 2000)
    with emulator() as server:
        assert enrich(base, server, "--distill-sample", "400").returncode == 0
        expected = server.stats()
    with emulator() as server:
        killed = enrich(crash, server, "--distill-sample", "400", MAPLE_CRASH_AT=point)
        resumed = enrich(crash, server, "--distill-sample", "400")
        stats = server.stats()
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert stats["bodies_billed_twice"] == 0
    for counter in ("chat_requests_billed", "embedding_inputs_billed"):
        assert stats[counter] == expected[counter]
    keep = ["sku", "llm_parsed", "llm_source", "llm_confidence"]
    assert_frame_equal(
        pl.read_parquet(crash / "out.parquet").select(keep),
        pl.read_parquet(base / "out.parquet").select(keep),
    )
