"""Provider queue limits through ``maple enrich`` as a user runs it, against the emulator over
HTTP: a job 5x the enqueued-token limit, the limit configured, and Anthropic's queue limit."""

import json
import re
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.storage import Storage
from maple_engine.submit.queue import Queue
from tests.e2e.cli import maple

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
PROMPT = "Extract the brand and size from: {title} / {description}"
ROWS = 300
SHARD_ROWS = 30  # 10 shards


def enrich_args(
    tmp_path: Path, job: str, *extra: str, provider: str = "emulator", shard_rows: int = SHARD_ROWS
) -> list[str]:
    model = "claude-haiku-4-5" if provider == "anthropic" else "gpt-4o-mini"
    return [
        "enrich", str(CATALOG), "--prompt", PROMPT, "--model", model, "--provider", provider,
        "--storage", str(tmp_path / "store"), "--job", job, "--quiet",
        "--output", str(tmp_path / f"{job}.parquet"), "--poll-interval", "0.2",
        "--max-requests-per-batch", str(shard_rows), *extra,
    ]  # fmt: skip


def total_tokens(tmp_path: Path) -> int:
    """The job's prompt tokens, from ``--dry-run`` (the emulator's own formula)."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as probe:
        result = maple(*enrich_args(tmp_path, "probe", "--dry-run"), url=probe.url)
    assert result.returncode == 0, result.stderr
    match = re.search(r"^input tokens\s+~([\d,]+)", result.stdout, re.MULTILINE)
    assert match, result.stdout
    return int(match.group(1).replace(",", ""))


def all_succeeded(path: Path) -> None:
    out = pl.read_parquet(path)
    assert out.height == ROWS
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS


@pytest.mark.parametrize(
    ("configured", "batch_seconds"),
    [
        pytest.param(False, 3.0, marks=pytest.mark.slow, id="learned"),
        pytest.param(True, 1.0, marks=pytest.mark.slow, id="configured"),
    ],
)
def test_job_five_times_the_enqueued_limit(
    tmp_path: Path, configured: bool, batch_seconds: float
) -> None:
    """Both about 20 s alone (the learned case 35 s: its batches must be long enough for the
    queue to fill while the limit is unknown, one batch at a time then), so marked slow; the
    emulator's limit and the sensor's gating have fast tests in the default suite."""
    limit = total_tokens(tmp_path) // 5
    config = EmulatorConfig(batch_seconds=batch_seconds, enqueued_token_limit=limit)
    extra = ("--max-enqueued-tokens", str(limit)) if configured else ()
    with EmulatorServer(config) as server:
        result = maple(*enrich_args(tmp_path, "big", *extra), url=server.url)
        stats = server.stats()
    assert result.returncode == 0, result.stderr + result.stdout
    all_succeeded(tmp_path / "big.parquet")
    assert 0 < stats["max_enqueued_tokens"] <= limit
    assert stats["batches_failed_token_limit"] == (0 if configured else 1)
    assert stats["bodies_billed_twice"] == 0
    remembered = Storage(str(tmp_path / "store"))
    key = Queue("emulator", "gpt-4o-mini", "tokens", probe=True).key
    if configured:
        assert not remembered.exists(key)
    else:
        assert remembered.read_json(key)["limit"] == limit  # learned from the message, kept


@pytest.mark.slow  # about 20 s alone
def test_anthropic_queue_limit(tmp_path: Path) -> None:
    """Six batches of 50 requests into a queue of 100: the first refusal teaches the limit."""
    config = EmulatorConfig(batch_seconds=0.6, anthropic_queue_limit=100)
    with EmulatorServer(config) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        args = enrich_args(tmp_path, "claude", provider="anthropic", shard_rows=50)
        result = maple(*args, url=server.url, **env)
        stats = server.stats()
    assert result.returncode == 0, result.stderr + result.stdout
    all_succeeded(tmp_path / "claude.parquet")
    assert stats["max_anthropic_queued_requests"] <= 100
    assert 1 <= stats["anthropic_queue_429"] <= 2  # learned from the first refusal
    assert stats["bodies_billed_twice"] == 0


@pytest.mark.slow
def test_while_the_limit_is_learned_one_run_sends_the_shards_one_after_another(
    tmp_path: Path,
) -> None:
    """With no limit known, each batch waits for the one before it to pass validation. The CLI
    used to spend one sensor tick and one Dagster run per shard on that; one ``submissions``
    run now sends all 10, each once the run's batch before it is validated (polled in the
    run), so still at most one batch is beyond what the queue was seen to hold."""
    timings = tmp_path / "timings.json"
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5)) as server:
        args = enrich_args(tmp_path, "chain", "--timings-json", str(timings))
        result = maple(*args, url=server.url)
        stats = server.stats()
    assert result.returncode == 0, result.stderr + result.stdout
    all_succeeded(tmp_path / "chain.parquet")
    assert stats["batches_created"] == ROWS // SHARD_ROWS
    figures = json.loads(timings.read_text())
    assert figures["stage_runs"]["submissions"] == 1, figures
    remembered = Storage(str(tmp_path / "store"))
    key = Queue("emulator", "gpt-4o-mini", "tokens", probe=True).key
    assert "limit" not in remembered.read_json(key)  # nothing refused: still not known
    estimates = sorted(p.name for p in (tmp_path / "store").rglob("estimate-*.json"))
    assert estimates == ["estimate-1.json"] * (ROWS // SHARD_ROWS)  # one per attempt, kept
    assert not list((tmp_path / "store").rglob("queue-*.json"))  # the queue reads the same one
    tokens = sum(
        json.loads(p.read_text())["input_tokens"]
        for p in (tmp_path / "store").rglob("estimate-*.json")
    )
    assert tokens == total_tokens(tmp_path)
