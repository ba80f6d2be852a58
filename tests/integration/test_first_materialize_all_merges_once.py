"""The UI's first "Materialize all" of a new job merges once: under ``dagster dev`` (daemon,
code server, a run worker per run, a throwaway SQLite instance) the job has one partition, the
stand-in ``awaiting_input_shards``, so the click is one run of it (not a backfill) whose
``merged`` waits for the sensor to send and collect the shards. The sensor, seeing that run
unfinished and not yet merged, collects without merging: ``merged`` is materialized by the
click's run alone, one run and one materialization."""

import textwrap
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.graph.shard_partitions import BEFORE_FIRST_CUT
from tests.integration.dagster_processes import dagster_dev, dev_folder, graphql, wait_ready
from tests.integration.test_sensor_chain import LAUNCH, merges

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # dagster dev and three runs: ~90 s
DEFS = textwrap.dedent(
    """
    import os
    import dagster as dg
    from maple_assets.factory import enrichment
    from maple_assets.wiring import maple_resources

    job = enrichment(name="fresh", source=os.environ["T_TABLE"], prompt="Name {title}",
                     model="gpt-4o-mini", provider="emulator", poll_interval_s=1)
    defs = dg.Definitions(assets=job.assets, asset_checks=job.checks, sensors=job.sensors,
                          resources=maple_resources([job]))
    """
)
STAGES = ("input_shards", "submissions", "raw_responses", "merged")
UNFINISHED = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"}
RUNS = """
{ runsOrError { ... on Runs { results { runId status assetSelection { path } } } } }
"""


def runs(url: str) -> list[dict[str, object]]:
    return list(graphql(url, RUNS)["data"]["runsOrError"]["results"])


def test_the_first_materialize_all_of_a_new_job_merges_once(tmp_path: Path) -> None:
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(6)]}).write_parquet(table)
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as emulator:
        env = dev_folder(tmp_path, DEFS, "ui", emulator.url, T_TABLE=str(table))
        with (
            dagster_dev(tmp_path, env) as port,
            dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as ins,
        ):
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, tmp_path / "dev.log")
            started = time.monotonic()
            while ins.get_dynamic_partitions("fresh_shards") != [BEFORE_FIRST_CUT]:
                assert time.monotonic() - started < 120, "the sensor registered no stand-in"
                time.sleep(0.5)
            params = {
                "selector": {
                    "repositoryLocationName": "ui",
                    "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": ["fresh", stage]} for stage in STAGES],
                },
                "runConfigData": {},
                "executionMetadata": {
                    "tags": [{"key": "dagster/partition", "value": BEFORE_FIRST_CUT}]
                },
            }
            got = graphql(url, LAUNCH, {"params": params})["data"]["launchRun"]
            assert got["__typename"] == "LaunchRunSuccess", got
            clicked = got["run"]["runId"]
            while any(r["status"] in UNFINISHED for r in runs(url)) or len(runs(url)) < 3:
                assert time.monotonic() - started < 400, (tmp_path / "dev.log").read_text()[-4000:]
                time.sleep(0.5)
            time.sleep(8)  # a few more ticks of the sensor: it asks for no merge of its own
            seen = runs(url)
            merged = ins.fetch_materializations(dg.AssetKey(["fresh", "merged"]), limit=10)
            stats = emulator.stats()
    assert all(r["status"] == "SUCCESS" for r in seen), seen
    assert [r["runId"] for r in seen if merges(r)] == [clicked]
    assert [m.run_id for m in merged.records] == [clicked]
    assert stats["requests_billed"] == 6
