"""Real-time providers against the emulator over real HTTP: ``maple enrich`` end to end, 429
storms with retry-after, 5xx, timeouts, quota, and a SIGKILL mid-shard then resume."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.errors import BreakerOpen
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.providers.realtime import RealtimeProvider
from maple_engine.send.checkpoints import RowCheckpoints
from maple_engine.send.lane import RealtimeLane
from maple_engine.storage.storage import Storage
from resources.costs import CostTracker
from tests.conftest import env_provider

MODELS = {"openai-realtime": "gpt-4o-mini", "anthropic-realtime": "claude-haiku-4-5"}


def point_at(server: EmulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, rpm=6000)) as running:
        point_at(running, monkeypatch)
        yield running


def catalog(path: Path, rows: int) -> Path:
    titles = [f"Maple Farm item {i} «{i % 7}»" for i in range(rows)]
    pl.DataFrame({"sku": [f"S-{i}" for i in range(rows)], "title": titles}).write_parquet(path)
    return path


def enrich_args(source: Path, out: Path, store: Path, provider: str) -> list[str]:
    model = MODELS.get(provider, "gpt-4o-mini")
    return [
        *("enrich", str(source), "--prompt", "Brand of {title}", "--model", model),
        *("--provider", provider, "--storage", str(store), "--output", str(out)),
        *("--poll-interval", "0.1", "--quiet"),
    ]


def enrich(source: Path, out: Path, store: Path, provider: str) -> pl.DataFrame:
    args = enrich_args(source, out, store, provider)
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return pl.read_parquet(out)


@pytest.mark.slow  # ~15 s; the default suite runs every name to its end (tests/conformance)
def test_enrich_output_matches_the_batch_path(server: EmulatorServer, tmp_path: Path) -> None:
    source = catalog(tmp_path / "in.parquet", 60)
    batch = enrich(source, tmp_path / "b.parquet", tmp_path / "b", "emulator")
    for provider in ("openai-realtime", "anthropic-realtime"):
        ours = enrich(source, tmp_path / f"{provider}.parquet", tmp_path / provider, provider)
        assert ours.schema == batch.schema
        assert ours.select("sku", "llm_response", "llm_status").equals(
            batch.select("sku", "llm_response", "llm_status")
        )
        assert ours["llm_batch_id"].str.starts_with("rt-").all()
        if provider == "openai-realtime":  # same model, no batch discount: twice the batch cost
            ratio = ours["llm_cost_usd"].sum() / batch["llm_cost_usd"].sum()
            assert ratio == pytest.approx(2.0, rel=1e-6)


def shard(provider: RealtimeProvider, rows: int, model: str = "gpt-4o-mini") -> ShardPayload:
    spec = RequestSpec(model, system="Be brief.")
    frame = pl.DataFrame({"t": [f"row {i} " * 8 for i in range(rows)]})
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("job", "s00000", 1, model, requests)


def run(provider: RealtimeProvider, rows: int, model: str = "gpt-4o-mini") -> pl.DataFrame:
    """One shard attempt of ``rows`` through the provider's lane, as a job sends it."""
    lane = RealtimeLane(provider)
    sub = lane.submit(shard(provider, rows, model))
    state = lane.poll([sub])[sub.batch_id]
    assert state.ended and state.completed == rows
    return lane.results(sub, state)


@pytest.mark.parametrize("name", ["openai-realtime", "anthropic-realtime"])
def test_the_limit_learned_at_first_contact_paces_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # 1200 RPM is 20 per one-second window. 40 requests in flight at once would have half
    # get a 429; the first request goes alone (first contact), and its answer's headers pace
    # the other 59 to the limit.
    with EmulatorServer(EmulatorConfig(rpm=1200)) as running:
        point_at(running, monkeypatch)
        limits = {"initial_concurrency": 40, "max_attempts": 10}
        provider = env_provider(name, checkpoint_root=str(tmp_path), **limits)
        model = MODELS[name]
        started = time.monotonic()
        rows = run(provider, 60, model)
        elapsed = time.monotonic() - started
        stats = running.stats()
    assert rows["status"].unique().to_list() == ["succeeded"]
    assert stats["realtime_429"] < 10  # no storm: paced from the first answer on
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == 60
    assert elapsed < 10


@pytest.mark.slow
def test_server_errors_and_rate_limit_faults_are_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = {"server_error": 0.3, "rate_limited": 0.2, "refused": 0.05}
    with EmulatorServer(EmulatorConfig(fail=faults, seed=7)) as running:
        point_at(running, monkeypatch)
        provider = env_provider("openai-realtime", checkpoint_root=str(tmp_path), max_attempts=8)
        rows = run(provider, 80)
        stats = running.stats()
    counts = dict(rows.group_by("failure_class").len().iter_rows())
    assert set(counts) <= {None, "refused"} and counts[None] >= 70
    assert stats["fault_server_error"] > 0 and stats["fault_rate_limited"] > 0
    assert stats["bodies_billed_twice"] == 0


def test_timeouts_from_first_contact_stop_the_attempt_with_no_row_failed(
    server: EmulatorServer, tmp_path: Path
) -> None:
    provider = env_provider(
        "openai-realtime", checkpoint_root=str(tmp_path), timeout_s=1e-6, max_attempts=2
    )
    lane = RealtimeLane(provider)
    with pytest.raises(BreakerOpen, match=r"failed 2 different requests the same way \(timed out"):
        lane.submit(shard(provider, 4))
    # two requests sent twice each, one at a time; none of the 4 rows is final
    assert server.stats()["realtime_requests"] <= 4
    checkpoints = lane._checkpoints("job", "s00000", 1)
    assert checkpoints.count() == 0


def test_timeouts_fail_a_row_as_server_error_after_bounded_sends(
    server: EmulatorServer, tmp_path: Path
) -> None:
    provider = env_provider(
        "openai-realtime", checkpoint_root=str(tmp_path), timeout_s=1e-6, max_attempts=2
    )
    rows = run(provider, 1)
    assert rows["failure_class"].to_list() == ["server_error"]
    assert rows["error"].str.contains("timed out").all()
    assert rows["error"].str.contains("after 2 sends").all()


def test_insufficient_quota_is_not_retried_and_stops_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EmulatorServer(EmulatorConfig(fail={"insufficient_quota": 1.0})) as running:
        point_at(running, monkeypatch)
        rows = run(
            env_provider("anthropic-realtime", checkpoint_root=str(tmp_path)),
            50,
            "claude-haiku-4-5",
        )
        sent = running.stats()["realtime_requests"]
    assert rows["failure_class"].unique().to_list() == ["insufficient_quota"]
    assert sent <= 4  # the first wave only


@pytest.mark.slow  # ~30 s: a kill harness, in the slow pass
def test_sigkill_mid_shard_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real API's latency, so that requests are in flight when the client dies
    config = EmulatorConfig(batch_seconds=0, rpm=6000, realtime_latency_s=(0.1, 0.3))
    with EmulatorServer(config) as server:
        point_at(server, monkeypatch)
        _kill_mid_shard_then_resume(server, tmp_path)


def _kill_mid_shard_then_resume(server: EmulatorServer, tmp_path: Path) -> None:
    source = catalog(tmp_path / "in.parquet", 500)
    calm = enrich(source, tmp_path / "calm.parquet", tmp_path / "calm", "openai-realtime")
    server.reset()
    store, out = tmp_path / "killed", tmp_path / "killed.parquet"
    args = enrich_args(source, out, store, "openai-realtime")
    child = subprocess.Popen(
        [sys.executable, "-m", "maple_assets.cli", *args],
        env=dict(os.environ),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not any(b'"custom_id"' in log.read_bytes() for log in store.glob("*/state/*/rt-1/wal-*")):
        assert child.poll() is None and time.monotonic() < deadline, "no row was checkpointed"
        time.sleep(0.02)
    # kill while sending: requests the server received in the last 20 ms are still in flight
    # (its latency is at least 100 ms), whatever pause the pacing or a loaded machine made
    received = server.stats()["requests_received"]
    while True:
        time.sleep(0.02)
        now = server.stats()["requests_received"]
        if now > received:
            break
        assert child.poll() is None and time.monotonic() < deadline, "sending never resumed"
        received = now
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    time.sleep(0.3)  # let requests the dead client left in flight finish on the server
    (attempt_dir,) = store.glob("*/state/*/rt-1")
    prefix = str(attempt_dir.relative_to(store))
    checkpointed = RowCheckpoints(Storage(str(store)), prefix).load().height
    billed_before = server.stats()["requests_billed"]
    assert 0 < checkpointed < 500 and not out.exists()

    summary = CliRunner().invoke(main, enrich_args(source, out, store, "openai-realtime")[:-1])
    assert summary.exit_code == 0, summary.output
    resumed, stats = pl.read_parquet(out), server.stats()
    # the same rows and answers; a row's sends may differ (a 429 while the limit is learned)
    differ = ["llm_batch_id", "llm_attempts"]
    assert_frame_equal(resumed.drop(differ), calm.drop(differ))
    # the summary counts only the rows this run sent, not the ones the killed run answered
    # (before, "sent 500 (by this run)"): they keep the attempt's id, this run's rows its own
    assert f"sent           {500 - checkpointed:,}  (by this run)" in summary.output
    by_batch = resumed.group_by("llm_batch_id").len().sort("llm_batch_id")["len"].to_list()
    assert by_batch == [checkpointed, 500 - checkpointed]
    lost_in_flight = billed_before - checkpointed  # answered by the server, never received
    assert 1 <= lost_in_flight <= 64  # bounded by what can be in flight (max_concurrency)
    assert stats["bodies_billed_twice"] == lost_in_flight
    assert stats["requests_billed"] == 500 + lost_in_flight
    # the sends whose answers died with the client are known from its log and booked at
    # the usage of the answers that replaced them: the ledger keeps the provider's bill
    assert sum(RowCheckpoints(Storage(str(store)), prefix).lost().values()) == lost_in_flight
    job = attempt_dir.relative_to(store).parts[0]
    with CostTracker(storage_root=str(store)) as costs:
        booked = costs.job_entries(job)
    with CostTracker(storage_root=str(tmp_path / "calm")) as costs:
        (calm_entry,) = costs.job_entries(job)
    assert sum(e.requests for e in booked) == stats["requests_billed"]
    extra = sum(e.input_tokens for e in booked) - calm_entry.input_tokens
    assert 0 < extra <= lost_in_flight * 40  # the lost rows' prompts, at most 40 tokens each


@pytest.mark.slow
@pytest.mark.paced
def test_two_processes_on_one_model_share_its_limit(tmp_path: Path) -> None:
    """Two `maple enrich` processes (two jobs, one account and model) pace to half the learned
    limit each, so together they stay under it: a 1,200 RPM limit enforced per second (20 per
    window), 160 rows each. Measured: 3 429s; each pacing to the whole limit: 46."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0, rpm=1200)) as running:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{running.url}/v1",
            "OPENAI_API_KEY": "test-key",
            "MAPLE_EMULATOR_URL": running.url,
        }
        store = tmp_path / "store"  # the root both share (as runs on one deployment do)
        children = []
        for name in ("one", "two"):
            source = tmp_path / f"{name}.parquet"
            pl.DataFrame({"title": [f"{name} item {i}" for i in range(160)]}).write_parquet(source)
            args = enrich_args(source, tmp_path / f"{name}.out.parquet", store, "openai-realtime")
            children.append(
                subprocess.Popen(
                    [sys.executable, "-m", "maple_assets.cli", *args, "--job", name],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outputs = [child.communicate(timeout=120)[0] for child in children]
        stats = running.stats()
    assert [child.returncode for child in children] == [0, 0], outputs
    assert stats["requests_billed"] == 320 and stats["bodies_billed_twice"] == 0
    # Before the second sender's first heartbeat reaches the first (at most 2 s), both may
    # pace to the whole limit; after that, never.
    assert stats["realtime_429"] <= 15, stats
    assert not list((store / "_ratelimits").rglob("*.json"))  # both senders left
