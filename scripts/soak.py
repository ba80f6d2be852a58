"""Leave the sample code location running and look for red: the emulator and ``maple dev`` (the
README's ``dagster dev`` for scripts) over a copy of the project, with no provider key, for
``--minutes`` (default 60); then read Dagster's GraphQL API and the ``dagster dev`` log.

    python scripts/soak.py [--minutes 60] [--out soak.json] [--bin DIR] [--no-launch]

At the start it materializes ``grocery_catalog`` and ``product_attributes/input_shards`` over
GraphQL (as a click in the UI does; ``--no-launch``: nothing) and lets the sensors and the
automation carry the sample to its reports. At the end it prints, and writes to ``--out``:
the runs per kind and status, each run that failed or did nothing (no materialization,
observation or check evaluation), failed or errored checks, failed sensor and schedule ticks,
and the warnings in the log by message. Exits 1 on any red state or run that did nothing.

The start-up and the project copy are the UI walk's (``scripts/ui_walk.py``).
"""

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ui_walk import dev_stack, graphql, latest

LOCATION = "maple"  # workspace.yaml's location_name
STARTS = (["grocery_catalog"], ["product_attributes", "input_shards"])
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
RUNS = """{ runsOrError { ... on Runs { results { runId jobName status creationTime startTime
  endTime assetSelection { path } tags { key value } } } } }"""
EVENTS = """query($runId: ID!) { logsForRun(runId: $runId, limit: 10000) {
  ... on EventConnection { events { __typename } } } }"""
DONE = {"MaterializationEvent", "ObservationEvent", "AssetCheckEvaluationEvent"}
STATES = """{ repositoriesOrError { ... on RepositoryConnection { nodes {
  sensors { name sensorState { ticks(limit: 5000) { status timestamp runIds
    error { message } } } }
  schedules { name scheduleState { ticks(limit: 500) { status error { message } } } } } } } }"""
CHECKS = """{ assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks {
  name executionForLatestMaterialization { status evaluation { severity description } } } } } } }"""
WARNING = re.compile(r"(\w*Warning): (.*)|- WARNING - (.*)")


def launch(base: str, path: list[str]) -> str:
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": path}],
        },
        "mode": "default",
    }
    answer = graphql(base, LAUNCH, params=params)["launchRun"]
    if answer["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"soak: could not launch {'/'.join(path)}: {answer}")
    return str(answer["run"]["runId"])


def run_kind(run: dict[str, Any]) -> str:
    """What a run was for: its job, or the assets it selected (an asset job's run)."""
    tags = {t["key"]: t["value"] for t in run["tags"]}
    paths = sorted({"/".join(a["path"]) for a in run["assetSelection"] or []})
    what = ", ".join(paths) if run["jobName"] == "__ASSET_JOB" else run["jobName"]
    by = "sensor" if "dagster/sensor_name" in tags else "automation" if any(
        k.startswith("dagster/from_automation") for k in tags
    ) else "launched"  # fmt: skip
    return f"{what} ({by})"


def look(base: str, log: Path) -> dict[str, Any]:
    """What the code location shows after the soak: runs, checks, ticks, warnings."""
    return {
        **runs_seen(base),
        "red_checks": red_checks(base),
        **ticks_seen(base),
        "warnings": warnings_in(log),
        "merged": latest(base, ["product_attributes", "merged"]),
    }


def runs_seen(base: str) -> dict[str, Any]:
    """Every run by kind and status; those that failed, and those that did nothing."""
    runs = graphql(base, RUNS)["runsOrError"]["results"]
    kinds: collections.Counter[str] = collections.Counter()
    red, idle = [], []
    for run in runs:
        kinds[f"{run_kind(run)}: {run['status']}"] += 1
        if run["status"] not in ("SUCCESS", "STARTED", "QUEUED", "STARTING"):
            red.append({"run": run["runId"], "kind": run_kind(run), "status": run["status"]})
        events = graphql(base, EVENTS, runId=run["runId"])["logsForRun"]["events"]
        if run["status"] == "SUCCESS" and not DONE & {e["__typename"] for e in events}:
            idle.append({"run": run["runId"], "kind": run_kind(run)})
    return {
        "runs": len(runs),
        "runs_by_kind": dict(sorted(kinds.items())),
        "red_runs": red,
        "idle_runs": idle,
    }


def red_checks(base: str) -> list[dict[str, Any]]:
    """The checks whose latest evaluation did not pass."""
    found = []
    for node in graphql(base, CHECKS)["assetNodes"]:
        for check in (node["assetChecksOrError"] or {}).get("checks", []):
            run = check["executionForLatestMaterialization"]
            if run and run["status"] not in ("SUCCEEDED", "IN_PROGRESS"):
                key = "/".join(node["assetKey"]["path"])
                found.append({"check": f"{key}:{check['name']}", **run})
    return found


def ticks_seen(base: str) -> dict[str, Any]:
    """Every sensor's and schedule's ticks by status, and the failed ones."""
    ticks: collections.Counter[str] = collections.Counter()
    failed = []
    for repo in graphql(base, STATES)["repositoriesOrError"]["nodes"]:
        states = [(s["name"], s["sensorState"]) for s in repo["sensors"]]
        states += [(s["name"], s["scheduleState"]) for s in repo["schedules"]]
        for name, state in states:
            for tick in state["ticks"]:
                ticks[f"{name}: {tick['status']}"] += 1
                if tick["status"] == "FAILURE":
                    failed.append({"instigator": name, "error": tick["error"]})
    return {"ticks": dict(sorted(ticks.items())), "failed_ticks": failed}


def warnings_in(log: Path) -> dict[str, int]:
    """The ``dagster dev`` log's warnings, by message, most frequent first."""
    warnings: collections.Counter[str] = collections.Counter()
    for line in log.read_text(errors="replace").splitlines():
        found = WARNING.search(line)
        if found:
            warnings[" ".join(filter(None, found.groups()))[:200]] += 1
    return dict(warnings.most_common())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path("soak.json"))
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                        help="folder of the maple and dagster commands")  # fmt: skip
    parser.add_argument("--no-launch", action="store_true", help="materialize nothing at start")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    with dev_stack(work, args.bin, []) as (_, base):
        started = time.monotonic()
        for path in () if args.no_launch else STARTS:
            launch(base, path)
            time.sleep(20)  # the catalog first, then its enrichment
        time.sleep(max(0.0, args.minutes * 60 - (time.monotonic() - started)))
        seen = {"minutes": args.minutes, "work": str(work), **look(base, work / "dev.log")}
    args.out.write_text(json.dumps(seen, indent=1))
    print(json.dumps({k: v for k, v in seen.items() if k != "merged"}, indent=1))
    bad = seen["red_runs"] or seen["idle_runs"] or seen["red_checks"] or seen["failed_ticks"]
    print(f"soak: {'RED' if bad else 'green'} after {args.minutes:g} min; logs in {work}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
