"""Applications submit jobs through Dagster's own API: ``dagster dev`` (webserver, daemon, code
server and one run worker per run, as separate processes) on a throwaway SQLite instance, a code
location that opts in to ``maple_job``, the emulator in this process.

Two applications submit at once with ``DagsterGraphQLClient``: one submits the job ``shared``
twice, the other the job ``solo``. Every row is paid once (the emulator's ``requests_billed``),
the runs carry ``maple/job``, and a bad spec fails its run at once with the CLI's one line,
nothing uploaded.
"""

import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from dagster_graphql import DagsterGraphQLClient

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.integration.dagster_processes import dagster_dev, dev_folder, graphql, wait_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    # dagster-graphql 1.13 calls gql 4's execute(variable_values=...), deprecated there.
    pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning"),
]
DEFS = textwrap.dedent(
    """
    import dagster as dg
    from maple_assets import maple_job

    defs = dg.Definitions(jobs=[maple_job()])
    """
)
RUN = """
query($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { status tags { key value } }
  }
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events { __typename ... on ExecutionStepFailureEvent { error { message } } }
    }
  }
}
"""
ROWS = {"shared": 8, "solo": 5}
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A code location with ``maple_job`` under ``dagster dev``, and the emulator it uses."""
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as emulator:
        env = dev_folder(tmp_path, DEFS, "apps", emulator.url)
        with dagster_dev(tmp_path, env) as port:
            wait_ready(f"http://127.0.0.1:{port}", tmp_path / "dev.log")
            yield {"port": port, "url": f"http://127.0.0.1:{port}", "emulator": emulator,
                   "dir": tmp_path, "log": tmp_path / "dev.log"}  # fmt: skip


def spec(table: Path, job: str, **more: Any) -> dict[str, Any]:
    config = {"input": str(table), "prompt": "Describe {title}", "model": "gpt-4o-mini",
              "provider": "emulator", "job": job, "max_requests_per_batch": 4}  # fmt: skip
    return {"ops": {"enrich": {"config": config | more}}}


LAUNCH = """
mutation($p: ExecutionParams!) {
  launchRun(executionParams: $p) {
    __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  }
}
"""


def launch_over_http(url: str, run_config: dict[str, Any]) -> str:
    """The README's curl example: a plain POST to /graphql."""
    selector = {"repositoryLocationName": "apps", "repositoryName": "__repository__",
                "jobName": "maple_job"}  # fmt: skip
    params = {"p": {"selector": selector, "runConfigData": run_config}}
    got = graphql(url, LAUNCH, params)["data"]["launchRun"]
    assert got["__typename"] == "LaunchRunSuccess", got
    return str(got["run"]["runId"])


def wait_finished(client: DagsterGraphQLClient, run_id: str, log: Path) -> str:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = client.get_run_status(run_id).value
        if status in FINISHED:
            return str(status)
        time.sleep(1.0)
    raise AssertionError(f"run {run_id} did not finish:\n{log.read_text()[-3000:]}")


RUNS = "{ runsOrError { ... on Runs { results { runId jobName } } } }"
ASSETS = "{ assetsOrError { ... on AssetConnection { nodes { key { path } } } } }"


def run_info(url: str, run_id: str) -> tuple[dict[str, str], list[str]]:
    data = graphql(url, RUN, {"runId": run_id})["data"]
    tags = {t["key"]: t["value"] for t in data["runOrError"]["tags"]}
    failures = [
        e["error"]["message"]
        for e in data["logsForRun"]["events"]
        if e["__typename"] == "ExecutionStepFailureEvent"
    ]
    return tags, failures


def test_two_applications_submit_concurrently_and_each_row_is_paid_once(
    apps: dict[str, Any],
) -> None:
    tables = {}
    for job, rows in ROWS.items():
        tables[job] = apps["dir"] / f"{job}.csv"
        pl.DataFrame({"title": [f"{job} {i}" for i in range(rows)]}).write_csv(tables[job])
    submissions = {"a": [spec(tables["shared"], "shared")] * 2, "b": [spec(tables["solo"], "solo")]}

    def application(name: str) -> list[str]:
        client = DagsterGraphQLClient("127.0.0.1", port_number=apps["port"])
        return [client.submit_job_execution("maple_job", run_config=c) for c in submissions[name]]

    with ThreadPoolExecutor(2) as pool:  # the two applications at once
        launched = dict(zip(submissions, pool.map(application, submissions), strict=True))
    client = DagsterGraphQLClient("127.0.0.1", port_number=apps["port"])
    runs = {run_id: "shared" for run_id in launched["a"]} | {launched["b"][0]: "solo"}
    for run_id, job in runs.items():
        assert wait_finished(client, run_id, apps["log"]) == "SUCCESS", run_info(
            apps["url"], run_id
        )
        tags, _ = run_info(apps["url"], run_id)
        assert tags["maple/job"] == job and tags["maple/status"] == "succeeded"
    stats = apps["emulator"].stats()
    assert stats["requests_billed"] == sum(ROWS.values())  # "shared" twice: paid once
    assert stats["batches_created"] == 2 + 2  # 8 rows in 4s, 5 rows in 4s (and a 1)
    for job, rows in ROWS.items():
        out = pl.read_csv(tables[job].with_name(f"{job}_enriched.csv"))
        assert out.height == rows and (out["llm_status"] == "succeeded").all()
    # the deployment shows the three maple_job runs, not the jobs' stage runs or assets
    listed = graphql(apps["url"], RUNS)["data"]["runsOrError"]["results"]
    assert sorted(r["jobName"] for r in listed) == ["maple_job"] * 3, listed
    assets = graphql(apps["url"], ASSETS)["data"]["assetsOrError"]["nodes"]
    assert assets == [], assets

    uploaded = stats["files_uploaded"]
    bad = launch_over_http(apps["url"], spec(tables["solo"], "bad", prompt="About {nope}"))
    started = time.monotonic()
    assert wait_finished(client, bad, apps["log"]) == "FAILURE"
    tags, failures = run_info(apps["url"], bad)
    line = tags["maple/error"]
    assert "['nope']" in line and "Available columns" in line and "\n" not in line
    assert any(line in message for message in failures)
    assert time.monotonic() - started < 120
    assert apps["emulator"].stats()["files_uploaded"] == uploaded  # nothing uploaded
