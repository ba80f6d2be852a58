"""Two drivers of one job at once pay for nothing twice.

Real ``maple enrich`` processes (and a Dagster run of the submissions asset, as the UI launches
it) against one emulator in this process, whose counters prove what was created and billed.
The drivers share a local storage root, or (slow pass) one on SeaweedFS, a real S3 store
(`tests.seaweedfs`) whose conditional PutObjects make the driver lease and the batch claims.
"""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.storage.storage import Storage
from tests.conftest import BUCKET

MAPLE = str(Path(sys.executable).parent / "maple")
REPO = Path(__file__).parents[2]
ROWS, PER_BATCH = 24, 4  # six shards
SHARDS = ROWS // PER_BATCH


def setup(tmp_path: Path) -> Path:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"thing {i}" for i in range(ROWS)]}).write_parquet(table)
    return table


@pytest.fixture(params=["local", pytest.param("seaweedfs", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The drivers' storage root: a local folder, or one on SeaweedFS (the AWS variables
    pointed at it)."""
    if request.param == "local":
        return str(tmp_path / "store")
    request.getfixturevalue("seaweedfs")
    return f"s3://{BUCKET}/store"


def command(table: Path, work: Path, *extra: str, store: str | None = None) -> list[str]:
    return [
        MAPLE, "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", store or str(work / "store"), "--job", "shared",
        "--output", str(work / "out.parquet"), "--max-requests-per-batch", str(PER_BATCH),
        "--poll-interval", "0.1", "--quiet", *extra,
    ]  # fmt: skip


def start(cmd: list[str], server: EmulatorServer) -> subprocess.Popen[str]:
    env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=240)
    return proc.returncode, out, err


def assert_paid_once(stats: dict[str, Any], batches: int = SHARDS) -> None:
    assert stats["bodies_billed_twice"] == 0, stats
    assert stats["requests_billed"] == ROWS, stats
    assert stats["batches_created"] == batches, stats
    assert stats["files_uploaded"] == batches, stats


def emulator() -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(batch_seconds=0.5))


@pytest.mark.slow  # ~15-22 s: two full drivers
def test_two_drivers_started_together_both_print_the_result(tmp_path: Path, store: str) -> None:
    table = setup(tmp_path)
    with emulator() as server:
        procs = [start(command(table, tmp_path, "--wait", store=store), server) for _ in range(2)]
        results = [finish(p) for p in procs]
        stats = server.stats()
    for code, out, err in results:
        assert code == 0, err[-2000:]
        assert f"rows           {ROWS}" in out and "succeeded      24" in out
    assert any("waiting for maple enrich on" in err for _, _, err in results)
    assert_paid_once(stats)
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS


@pytest.mark.slow
@pytest.mark.parametrize("second_waits", [False, True])
def test_a_staggered_second_driver_exits_at_once_or_waits(
    tmp_path: Path, store: str, second_waits: bool
) -> None:
    table = setup(tmp_path)
    wait = ["--wait"] if second_waits else []
    with emulator() as server:
        first = start(command(table, tmp_path, store=store), server)
        _wait_for_lease(Storage(store), "shared/state/driver")
        began = time.monotonic()
        second = finish(start(command(table, tmp_path, *wait, store=store), server))
        elapsed = time.monotonic() - began
        code, out, err = finish(first)
        stats = server.stats()
    assert code == 0, err[-2000:]
    if second_waits:
        assert second[0] == 0, second[2][-2000:]
        assert out == second[1]  # the same summary, paid once
    else:
        assert second[0] == 2 and elapsed < 30, second
        assert "job 'shared' is already running: maple enrich on" in second[2]
        assert "since" in second[2] and "pid" in second[2]
    assert_paid_once(stats)


UI_RUN = textwrap.dedent(
    """
    import os, sys, time
    import dagster as dg
    from maple_assets.factory import enrichment
    from maple_assets.wiring import wire_resources
    from maple_engine.providers.registry import build_provider

    table, store, out, url = sys.argv[1:5]
    en = enrichment(name="shared", source=table, prompt="Name {title}", model="gpt-4o-mini",
                    provider="emulator", output=out, max_requests_per_batch=4)
    resources = wire_resources(store, {"emulator": build_provider("emulator", url)})
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize(en.assets, selection=dg.AssetSelection.assets(en.key("input_shards")),
                   instance=instance, resources=resources)
    keys = instance.get_dynamic_partitions(en.partitions_def.name)
    if len(sys.argv) > 5:  # a barrier: start submitting when the test says go
        open(sys.argv[5] + "." + str(os.getpid()), "w").close()
        while not os.path.exists(sys.argv[5]):
            time.sleep(0.005)
        tags = {"dagster/asset_partition_range_start": keys[0],
                "dagster/asset_partition_range_end": keys[-1]}  # one run, as a backfill does
        result = dg.materialize(en.assets, selection=dg.AssetSelection.assets(
            en.key("submissions")), instance=instance, resources=resources, tags=tags)
        assert result.success
    for key in keys:  # one run per shard, as the UI's backfill launches them
        result = dg.materialize(en.assets, selection=dg.AssetSelection.assets(
            en.key("submissions")), partition_key=key, instance=instance, resources=resources)
        assert result.success
    print(len(keys))
    """
)


def test_a_ui_style_run_beside_a_cli_run_creates_each_batch_once(tmp_path: Path) -> None:
    table = setup(tmp_path)
    store, out = tmp_path / "store", tmp_path / "out.parquet"
    with emulator() as server:
        ui = ui_run(table, tmp_path, server.url)
        cli = start(command(table, tmp_path), server)
        ui_code, ui_out, ui_err = finish(ui)
        code, _, err = finish(cli)
        stats = server.stats()
    assert ui_code == 0, ui_err[-3000:]
    assert code == 0, err[-2000:]
    assert ui_out.strip() == str(SHARDS)
    assert_paid_once(stats)
    claims = sorted(p.parent.parent.name for p in store.glob("shared/state/*/claim-1/*.json"))
    assert len(set(claims)) == SHARDS  # every shard's batch went through its claim
    cli_out = pl.read_parquet(out)
    assert_frame_equal(cli_out.select("title"), pl.read_parquet(table))


def ui_run(table: Path, work: Path, url: str, *barrier: str) -> subprocess.Popen[str]:
    args = [str(table), str(work / "store"), str(work / "out.parquet"), url, *barrier]
    return subprocess.Popen(
        [sys.executable, "-c", UI_RUN, *args], env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow  # ~10 s; its UI-run sibling stays in the default suite
def test_a_run_re_executed_while_its_original_runs_creates_each_batch_once(
    tmp_path: Path,
) -> None:
    """Two runs of the same shards released at the same instant: one batch per shard."""
    table = setup(tmp_path)
    go = tmp_path / "go"
    with emulator() as server:
        runs = [ui_run(table, tmp_path, server.url, str(go)) for _ in range(2)]
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("go.*"))) < 2:
            assert time.monotonic() < deadline and all(r.poll() is None for r in runs)
            time.sleep(0.02)
        go.touch()
        results = [finish(r) for r in runs]
        stats = server.stats()
    for code, out, err in results:
        assert code == 0, err[-3000:]
        assert out.strip() == str(SHARDS)
    assert stats["batches_created"] == SHARDS, stats
    assert stats["files_uploaded"] == SHARDS, stats


def _wait_for_lease(storage: Storage, folder: str) -> None:
    deadline = time.monotonic() + 60
    while not any(key.endswith(".json") for key in storage.list_keys(folder)):
        assert time.monotonic() < deadline, "the first driver never took the lease"
        time.sleep(0.05)
