"""Kill ``maple enrich`` (SIGKILL) at every durable step, rerun it, get the same output.

The emulator runs in this test process, so its state and billing counters survive the CLI
being killed. Faults (rate limits, expired batches) are drawn from the request body and how often
the emulator has seen it, so an uninterrupted run and a crashed-then-resumed run see the same
faults unless a request is sent twice, which is exactly what the tests rule out. The slow pass
kills it on a local storage root and on one on SeaweedFS (a real S3 store, `tests.seaweedfs`),
whose leases and claims are conditional PutObjects.
"""

import os
import random
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner, instance_for
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.crashpoints import POINTS
from maple_engine.providers.registry import build_provider
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END_TAG,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START_TAG,
)
from resources.dagster_private import (
    PARTITION_NAME_TAG as PARTITION_TAG,
)
from tests.conftest import BUCKET

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 16
FAULTS = {"rate_limited": 0.3, "expired": 0.3}
PROMPT = "Name {title}"


def emulator() -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(seed=11, batch_seconds=0.2, fail=FAULTS, control_fail=0))


def make_table(path: Path) -> Path:
    pl.DataFrame(
        {"sku": [f"S{i:03d}" for i in range(ROWS)], "title": [f"thing {i}" for i in range(ROWS)]}
    ).write_parquet(path)
    return path


def command(table: Path, work: Path, store: str | None = None) -> list[str]:
    """``maple enrich`` of ``table`` with its output in ``work``, its state in ``store``
    (default: the folder ``work/store``)."""
    return [
        MAPLE, "enrich", str(table), "--prompt", PROMPT, "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", store or str(work / "store"), "--job", "crash",
        "--output", str(work / "out.parquet"), "--max-requests-per-batch", "8",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip


def env_for(server: EmulatorServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAPLE_CRASH")}
    return {**env, "MAPLE_EMULATOR_URL": server.url, **extra}


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=240, check=False,
        start_new_session=True,
    )  # fmt: skip


def comparable(path: Path) -> pl.DataFrame:
    """The output without provider batch ids (the emulator numbers batches process-wide)."""
    return pl.read_parquet(path).drop("llm_batch_id")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("baseline")
    table = make_table(work / "items.parquet")
    with emulator() as server:
        result = run(command(table, work), env_for(server))
        stats = server.stats()
    assert result.returncode == 0, result.stderr
    frame = comparable(work / "out.parquet")
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    assert frame["llm_attempts"].max() > 1  # type: ignore[operator]  # faults did happen
    return {"frame": frame, "stats": stats}


@pytest.fixture(params=["local", "seaweedfs"])
def stores(request: pytest.FixtureRequest) -> str | None:
    """Where the jobs keep their state: None for a folder of each job's own, or the prefix of
    an ``s3://`` root on SeaweedFS (the AWS variables pointed at it)."""
    if request.param == "local":
        return None
    request.getfixturevalue("seaweedfs")
    return f"s3://{BUCKET}"


def crash_then_resume(point: str, work: Path, stores: str | None = None) -> dict[str, Any]:
    work.mkdir()
    table = make_table(work / "items.parquet")
    cmd = command(table, work, stores and f"{stores}/{work.name}")
    with emulator() as server:
        crashed = run(cmd, env_for(server, MAPLE_CRASH_AT=point))
        resumed = run(cmd, env_for(server))
        stats = server.stats()
    return {"crashed": crashed, "resumed": resumed, "stats": stats, "out": work / "out.parquet"}


@pytest.mark.slow
def test_kill_at_each_point_then_rerun_matches_uninterrupted_run(
    baseline: dict[str, Any], tmp_path: Path, stores: str | None
) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {p: pool.submit(crash_then_resume, p, tmp_path / p, stores) for p in POINTS}
        outcomes = {p: f.result() for p, f in futures.items()}
    for point, got in outcomes.items():
        assert got["crashed"].returncode == -signal.SIGKILL, (point, got["crashed"].stderr[-2000:])
        assert got["resumed"].returncode == 0, (point, got["resumed"].stderr[-2000:])
        try:
            assert_frame_equal(comparable(got["out"]), baseline["frame"])
        except AssertionError as exc:
            raise AssertionError(f"output after a crash at {point}: {exc}") from exc
        stats, expected = got["stats"], baseline["stats"]
        assert stats["bodies_billed_twice"] == 0, point
        assert stats["requests_billed"] == expected["requests_billed"], point
        assert stats["batches_created"] == expected["batches_created"], point


@pytest.mark.slow
def test_random_sigkills_of_the_process_group(
    baseline: dict[str, Any], tmp_path: Path, stores: str | None
) -> None:
    """Kill the whole process group at random moments (seeded), twice, then finish."""
    rng = random.Random(4)
    table = make_table(tmp_path / "items.parquet")
    kills = 0
    with emulator() as server:
        cmd, env = command(table, tmp_path, stores and f"{stores}/random"), env_for(server)
        for _ in range(2):
            proc = subprocess.Popen(
                cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            try:
                proc.wait(timeout=rng.uniform(3.0, 9.0))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
        final = run(cmd, env)
        stats = server.stats()
    assert kills >= 1
    assert final.returncode == 0, final.stderr[-2000:]
    assert_frame_equal(comparable(tmp_path / "out.parquet"), baseline["frame"])
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == baseline["stats"]["requests_billed"]


@pytest.mark.slow  # shares the kill -9 baseline (30 s to build) with the long pass
def test_a_failed_dagster_run_re_executed_gives_the_same_output(
    baseline: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raw_responses run fails after writing results-n; running that partition again (what a
    re-execution from the UI does) and carrying on converges on the uninterrupted output."""
    table = make_table(tmp_path / "items.parquet")
    store, out = str(tmp_path / "store"), tmp_path / "out.parquet"
    en = enrichment(
        name="crash", source=str(table), prompt=PROMPT, model="gpt-4o-mini",
        provider="emulator", output=str(out), max_requests_per_batch=8,
    )  # fmt: skip
    with emulator() as server:
        resources = wire_resources(store, {"emulator": build_provider("emulator", server.url)})
        instance = instance_for(store)
        monkeypatch.setenv("MAPLE_CRASH_AT", "after_results")
        monkeypatch.setenv("MAPLE_CRASH_MODE", "raise")
        with pytest.raises(Exception, match="after_results"):  # Dagster wraps the error
            Runner(en, resources, instance, poll_interval_s=0.1, quiet=True).run()
        failed = instance.get_runs(filters=_failed_runs())
        assert len(failed) == 1
        tags = failed[0].tags  # one shard, or a range of shards in one run
        first = tags.get(PARTITION_TAG) or tags[RANGE_START_TAG]
        last = tags.get(PARTITION_TAG) or tags[RANGE_END_TAG]
        monkeypatch.delenv("MAPLE_CRASH_AT")
        runner = Runner(en, resources, instance, poll_interval_s=0.1, quiet=True)
        runner.materialize(en.key("raw_responses"), first, last)  # the re-execution
        runner.run()
        resources["maple_costs"].close()
        stats = server.stats()
    assert_frame_equal(comparable(out), baseline["frame"])
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == baseline["stats"]["requests_billed"]


def _failed_runs() -> Any:
    import dagster as dg

    return dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE])
