"""A small job launched from the UI does not trickle: under ``dagster dev`` (daemon, code
server, a run worker per run, a throwaway SQLite instance) one click on ``input_shards`` of a
300-row enrichment in 6 shards, with the provider queue's limit not known, is carried to
``merged`` by the sensor with one ``submissions`` run: the shards that wait only for the batch
before them to pass validation go in the run of the admitted one, as a chain, instead of one
sensor tick and one run each. Every row once, nothing billed twice (the emulator's counters)."""

import json
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.integration.dagster_processes import dagster_dev, dev_folder, graphql, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROWS, PER_BATCH = 300, 50
DEFS = textwrap.dedent(
    f"""
    import os
    import dagster as dg
    from maple_assets.factory import enrichment
    from maple_assets.wiring import maple_resources

    job = enrichment(name="small", source=os.environ["T_TABLE"], prompt="Name {{title}}",
                     model="gpt-4o-mini", provider="emulator", team="ui",
                     max_requests_per_batch={PER_BATCH}, poll_interval_s=2)
    defs = dg.Definitions(assets=job.assets, asset_checks=job.checks, sensors=job.sensors,
                          resources=maple_resources([job]))
    """
)
LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""
RUNS = """
{ runsOrError { ... on Runs { results { status assetSelection { path } tags { key value } } } } }
"""


def runs(url: str) -> list[dict[str, object]]:
    return list(graphql(url, RUNS)["data"]["runsOrError"]["results"])


def stage(run: dict[str, object]) -> str:
    paths = run["assetSelection"] or []
    return str(paths[0]["path"][-1]) if paths else ""  # type: ignore[index]


def merges(run: dict[str, object]) -> bool:
    """The run materializes merged: its own run, or the last collect run that also merges."""
    paths = run["assetSelection"] or []
    return any(p["path"][-1] == "merged" for p in paths)  # type: ignore[index]


def test_one_click_carries_a_small_job_to_merged_with_one_chained_submissions_run(
    tmp_path: Path,
) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_parquet(table)
    merged = tmp_path / "store" / "small" / "state" / "merged.json"
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as emulator:
        env = dev_folder(tmp_path, DEFS, "ui", emulator.url, T_TABLE=str(table))
        with dagster_dev(tmp_path, env) as port:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, tmp_path / "dev.log")
            params = {
                "selector": {
                    "repositoryLocationName": "ui",
                    "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": ["small", "input_shards"]}],
                },
                "runConfigData": {},
            }
            clicked = time.monotonic()
            got = graphql(url, LAUNCH, {"params": params})["data"]["launchRun"]
            assert got["__typename"] == "LaunchRunSuccess", got
            while not any(merges(r) and r["status"] == "SUCCESS" for r in runs(url)):
                assert time.monotonic() - clicked < 300, (tmp_path / "dev.log").read_text()[-4000:]
                time.sleep(0.5)
            took = time.monotonic() - clicked
            seen = runs(url)
            stats = emulator.stats()
    submits = [r for r in seen if stage(r) == "submissions"]
    print(f"\n{ROWS} rows in {ROWS // PER_BATCH} shards: click to merged {took:.1f} s, "
          f"{len(seen)} runs ({len(submits)} submissions)")  # fmt: skip
    assert len(submits) == 1, [(stage(r), r["status"]) for r in seen]
    tags = {t["key"]: t["value"] for t in submits[0]["tags"]}  # type: ignore[attr-defined]
    assert tags["dagster/asset_partition_range_start"] != tags["dagster/asset_partition_range_end"]
    assert all(r["status"] == "SUCCESS" for r in seen), [(stage(r), r["status"]) for r in seen]
    assert stats["batches_created"] == ROWS // PER_BATCH
    assert stats["requests_billed"] == ROWS
    assert stats["bodies_billed_twice"] == 0
    out = pl.read_parquet(json.loads(merged.read_text())["path"])
    assert out.height == ROWS and out["llm_status"].to_list() == ["succeeded"] * ROWS
