"""A real-time job's first request leaves before ``maple enrich`` imports Dagster, and the job
ends exactly as one driven through Dagster from its first step: same output, ledger and asset
materializations; a SIGKILL while the first shards are sent (before any Dagster run), then a
rerun, bills no row twice.

``maple`` runs as a subprocess whose first import of ``dagster`` reads the emulator's counters
(``GET /_emulator/stats``) and writes them to a file: the requests the emulator had received by
the moment Dagster began to load. The Python API (``maple_assets.enrich``) drives the same job
through Dagster from its first step, as the reference.
"""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import maple_assets
from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.costs import CostLedger

ROWS = 24
JOB = "early"
# Runs ``maple`` with a finder that, on the first import of ``dagster``, saves the emulator's
# counters to the file ``argv[1]`` (``argv[2]``: the emulator's URL).
WATCHED = """
import runpy, sys, urllib.request
marker, url = sys.argv[1], sys.argv[2]

class FirstDagster:
    def find_spec(self, name, path=None, target=None):
        if name == "dagster":
            sys.meta_path.remove(self)
            with urllib.request.urlopen(url + "/_emulator/stats") as answer:
                open(marker, "wb").write(answer.read())
        return None

sys.meta_path.insert(0, FirstDagster())
sys.argv = ["maple", *sys.argv[3:]]
runpy.run_module("maple_assets.cli", run_name="__main__")
"""


def table(path: Path) -> Path:
    titles = [f"thing {i}" for i in range(ROWS)]
    pl.DataFrame({"sku": [f"S{i:03d}" for i in range(ROWS)], "title": titles}).write_parquet(path)
    return path


def options(work: Path) -> dict[str, Any]:
    """The job, as ``maple enrich`` flags and as the Python API's keywords."""
    return {
        "prompt": "Name {title}",
        "model": "gpt-4o-mini",
        "provider": "openai-realtime",
        "job": JOB,
        "storage": str(work / "store"),
        "output": str(work / "out.parquet"),
        "max_requests_per_batch": 10,  # three shards
        "poll_interval": 0.1,
    }


def flags(given: dict[str, Any]) -> list[str]:
    return [a for k, v in given.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def env(server: EmulatorServer, work: Path, **more: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"MAPLE_COST_DB", "MAPLE_PRICES"}}
    return {
        **clean,
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": "test",
        "DAGSTER_HOME": str(work / "dagster"),
        **more,
    }


def watched_enrich(
    server: EmulatorServer, source: Path, work: Path, **more: str
) -> subprocess.CompletedProcess[str]:
    marker = work / "stats_at_dagster_import.json"
    args = ["enrich", str(source), *flags(options(work)), "--quiet"]
    return subprocess.run(
        [sys.executable, "-c", WATCHED, str(marker), server.url, *args],
        capture_output=True,
        text=True,
        env=env(server, work, **more),
        timeout=300,
        check=False,
    )


def ledger(work: Path) -> list[tuple[Any, ...]]:
    with CostLedger(storage_root=str(work / "store")) as costs:
        entries = costs.job_entries(JOB)
    return sorted(
        (e.shard, e.attempt, e.mode, e.requests, e.input_tokens, e.output_tokens, e.cost_usd)
        for e in entries
    )


def materialized(work: Path) -> dict[str, list[str]]:
    """Each asset of the job, with the partitions of its materializations (in order)."""
    with dg.DagsterInstance.from_config(str(work / "dagster")) as instance:
        found = {}
        for asset in ("input_shards", "submissions", "raw_responses", "merged"):
            key = dg.AssetKey([JOB, asset])
            records = instance.fetch_materializations(key, limit=100).records
            found[asset] = sorted(str(r.partition_key) for r in records)
    return found


def dagster_runs(work: Path) -> int:
    home = work / "dagster"
    if not (home / "dagster.yaml").exists():
        return 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return len(instance.get_runs())


def emulator() -> EmulatorServer:
    return EmulatorServer(EmulatorConfig(seed=3, rpm=1200))


def test_the_first_request_leaves_before_dagster_loads_and_the_job_ends_as_through_dagster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = table(tmp_path / "in.parquet")
    early, reference = tmp_path / "early", tmp_path / "reference"
    with emulator() as server:
        result = watched_enrich(server, source, early)
        sent = server.stats()
    assert result.returncode == 0, result.stderr
    at_import = orjson.loads((early / "stats_at_dagster_import.json").read_bytes())
    assert at_import["realtime_requests"] >= 1  # sent before the first import of dagster
    assert "sent           24  (by this run)" in result.stdout

    with emulator() as server:  # the reference: driven through Dagster from its first step
        for name, value in env(server, reference).items():
            monkeypatch.setenv(name, value)
        for name in ("MAPLE_COST_DB", "MAPLE_PRICES"):
            monkeypatch.delenv(name, raising=False)
        given = {k: v for k, v in options(reference).items() if k != "storage"}
        run = maple_assets.enrich(str(source), storage=str(reference / "store"), **given)
        assert run.status == "succeeded"
        assert server.stats()["requests_billed"] == ROWS

    assert sent["requests_billed"] == ROWS and sent["bodies_billed_twice"] == 0
    assert_frame_equal(
        pl.read_parquet(early / "out.parquet"), pl.read_parquet(reference / "out.parquet")
    )
    assert ledger(early) == ledger(reference)
    assert len(ledger(early)) == 3
    assert materialized(early) == materialized(reference)
    assert materialized(early)["submissions"] == ["s00000", "s00001", "s00002"]


@pytest.mark.slow  # a kill -9 variant; the long pass (the default suite stays under 10 min)
def test_a_sigkill_before_dagster_loads_then_a_rerun_bills_no_row_twice(tmp_path: Path) -> None:
    source = table(tmp_path / "in.parquet")
    work = tmp_path / "work"
    with emulator() as server:
        # killed once the first shard's requests are all answered, before its attempt is
        # recorded: the first step that a rerun must not repeat
        killed = watched_enrich(server, source, work, MAPLE_CRASH_AT="after_create")
        assert killed.returncode == -9, killed.stderr
        assert dagster_runs(work) == 0  # killed in the early phase: no Dagster run yet
        assert server.stats()["requests_billed"] == 10  # the first shard
        rerun = watched_enrich(server, source, work)
        stats = server.stats()
    assert rerun.returncode == 0, rerun.stderr
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    out = pl.read_parquet(work / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert sorted(entry[0] for entry in ledger(work)) == ["s00000", "s00001", "s00002"]
