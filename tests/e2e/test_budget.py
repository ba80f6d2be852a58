"""Estimates, ``--dry-run``, ``--budget`` and cost reconciliation, through ``maple enrich`` as a
user runs it: a subprocess against an in-process emulator, checked against its billing counters
and the cost ledger."""

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from resources.costs import CostTracker
from tests.e2e.cli import NO_OPENAI_KEY, maple

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
PROMPT = "Extract the brand and size from: {title} / {description}"
JOB = "budget_job"
ROWS = 300


def enrich(
    server: EmulatorServer, tmp_path: Path, *extra: str, shard_rows: int = 60
) -> subprocess.CompletedProcess[str]:
    return maple(
        "enrich", str(CATALOG), "--prompt", PROMPT, "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(tmp_path / "store"), "--job", JOB,
        "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2",
        "--max-requests-per-batch", str(shard_rows), "--quiet",
        # A known queue limit: batches go out together (an unknown one is probed batch by
        # batch, and these budget checks need batches in flight together).
        "--max-enqueued-tokens", "100000000", *extra,
        url=server.url, drop=NO_OPENAI_KEY, timeout=600,
    )  # fmt: skip


def plan_value(stdout: str, label: str) -> float:
    """A number from the dry-run plan, e.g. ``batch USD      ~0.023845``."""
    match = re.search(rf"^{label}\s+[~<= ]*([\d,.]+)", stdout, re.MULTILINE)
    assert match, f"no {label!r} in:\n{stdout}"
    return float(match.group(1).replace(",", ""))


def ledger_total(tmp_path: Path) -> float:
    with CostTracker(storage_root=str(tmp_path / "store")) as costs:
        return costs.job_total(JOB)


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, seed=3)) as live:
        yield live


def test_dry_run_prints_the_plan_and_spends_nothing(server: EmulatorServer, tmp_path: Path) -> None:
    result = enrich(server, tmp_path, "--dry-run", "--budget", "5")
    assert result.returncode == 0, result.stderr
    assert server.stats()["files_uploaded"] == 0
    assert server.stats()["batches_created"] == 0
    assert server.stats()["requests_received"] == 0
    assert not (tmp_path / "store").exists()  # nothing written either
    assert not (tmp_path / "out.parquet").exists()
    out = result.stdout
    assert plan_value(out, "shards") == 5
    # The sample catalog repeats some rows: identical requests are sent once.
    sends = plan_value(out, "requests")
    repeats = re.search(r"(\d+) repeat an identical request", out)
    assert repeats is not None and f"to send of {ROWS} rows" in out
    assert sends + int(repeats[1]) == ROWS and sends < ROWS
    assert plan_value(out, "input tokens") > 0 and plan_value(out, "bytes") > 0
    assert plan_value(out, "output tokens") == sends * 256
    batch, realtime = plan_value(out, "batch USD"), plan_value(out, "real-time USD")
    assert 0 < batch < realtime
    for text in ("provider       emulator", "model          gpt-4o-mini", "budget USD"):
        assert text in out


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_budget_stops_before_overspending_and_a_larger_budget_finishes(
    server: EmulatorServer, tmp_path: Path
) -> None:
    dry = enrich(server, tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    per_batch = plan_value(dry.stdout, "batch USD") / 5  # 5 shards of 60 similar rows
    budget = 2.5 * per_batch

    stopped = enrich(server, tmp_path, "--budget", f"{budget:.8f}")
    assert stopped.returncode == 4, stopped.stderr
    assert "stopped: budget reached before shard s00002" in stopped.stderr
    assert "rerun with a larger --budget to continue" in stopped.stderr
    assert server.stats()["batches_created"] == 2
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert frame.height == ROWS
    sent = frame.filter((pl.col("llm_status") == "succeeded") & ~pl.col("llm_reused"))
    unsent = frame.filter(pl.col("llm_failure_class") == "not_sent")
    copies = frame.filter(pl.col("llm_reused"))  # identical requests answered once
    assert sent.height == 120 and unsent.height + copies.height == 180
    assert (unsent["llm_attempts"] == 0).all() and (unsent["llm_cost_usd"] == 0).all()
    assert ledger_total(tmp_path) <= budget + per_batch * 1.05  # no overshoot past one batch

    resumed = enrich(server, tmp_path, "--budget", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming job budget_job (was stopped: budget reached" in resumed.stderr
    assert "\nstopped:" not in resumed.stderr
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert (frame["llm_status"] == "succeeded").all()
    assert (frame["llm_attempts"] == 1).all()
    stats = server.stats()
    assert stats["batches_created"] == 5 and stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == ROWS - frame["llm_reused"].sum()
    assert "saved USD" in resumed.stdout and "real-time USD" in resumed.stdout


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_ledger_reconciles_with_rows_after_retries(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, seed=11, fail={"rate_limited": 0.3}, control_fail=0)
    with EmulatorServer(config) as flaky:
        dry = enrich(flaky, tmp_path, "--dry-run", shard_rows=150)
        result = enrich(flaky, tmp_path, shard_rows=150)
    assert result.returncode == 0, result.stderr
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert (frame["llm_status"] == "succeeded").all()
    assert frame["llm_attempts"].max() > 1  # rate-limited rows were retried
    ledger = ledger_total(tmp_path)
    paid = frame.filter(~pl.col("llm_reused"))  # a copy shows what its answer cost once
    assert abs(ledger - paid["llm_cost_usd"].sum()) < 1e-6
    # the prompt estimate of the requests sent is exact against the emulator's counts
    assert plan_value(dry.stdout, "input tokens") == paid["llm_input_tokens"].sum()


def test_unknown_model_fails_before_submitting_unless_untracked(
    server: EmulatorServer, tmp_path: Path
) -> None:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
    args = ["--provider", "openai", "--model", "acme-unpriced-1", "--max-requests-per-batch", "300"]
    common = [
        "enrich", str(CATALOG), "--prompt", PROMPT, "--storage", str(tmp_path / "store"),
        "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2", "--quiet", *args,
    ]  # fmt: skip
    refused = maple(*common, url=server.url, drop=NO_OPENAI_KEY, timeout=600, **env)
    assert refused.returncode == 2
    assert "No price known for model 'acme-unpriced-1'" in refused.stderr
    assert "--allow-untracked-cost" in refused.stderr
    assert server.stats()["files_uploaded"] == 0 and server.stats()["batches_created"] == 0

    allowed = maple(
        *common, "--allow-untracked-cost", url=server.url, drop=NO_OPENAI_KEY, timeout=600, **env
    )
    assert allowed.returncode == 0, allowed.stderr
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert (frame["llm_status"] == "succeeded").all()
    assert (frame["llm_cost_usd"] == 0).all()
    assert server.stats()["batches_created"] == 1


@pytest.mark.parametrize("budget", ["0", pytest.param("0.0001", marks=pytest.mark.slow)])
def test_the_budget_covers_the_canary(server: EmulatorServer, tmp_path: Path, budget: str) -> None:
    """The canary's real-time requests are spend like any batch: a budget that cannot hold
    them stops the job before one is sent, and a larger budget runs the canary and the job."""
    stopped = enrich(server, tmp_path, "--budget", budget, "--canary", "20")
    assert stopped.returncode == 4, stopped.stderr
    assert "stopped: budget reached before the canary: committed $0.000000" in stopped.stderr
    assert "+ the canary $" in stopped.stderr and "(20 requests)" in stopped.stderr
    stats = server.stats()
    assert stats["requests_received"] == 0 and stats["batches_created"] == 0
    assert ledger_total(tmp_path) == 0

    resumed = enrich(server, tmp_path, "--budget", "1", "--canary", "20")
    assert resumed.returncode == 0, resumed.stderr
    frame = pl.read_parquet(tmp_path / "out.parquet")
    assert (frame["llm_status"] == "succeeded").all()
    stats = server.stats()
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == ROWS - frame["llm_reused"].sum()  # canary rows kept
    assert 0 < ledger_total(tmp_path) <= 1
