"""Drive the Dagster UI as a person would: look at the checks before anything ran, launch the
example enrichment from the UI, let the sensor carry it to ``merged``, look at each shard's
``failed_rows`` check, edit the sample CSV and watch ``input_shards`` go stale, and screenshot
each page on the way.

    pip install playwright   # the browser is Debian's chromium: apt-get install chromium
    python scripts/ui_walk.py /tmp/shots [--bin DIR]

Only Playwright runs in this script's own Python; the emulator and ``dagster dev`` are the
``maple`` and ``dagster`` commands of ``--bin`` (default: beside this Python). They run on free
ports with a throwaway DAGSTER_HOME and storage root over a COPY of the repository's packages
in a temporary project folder, so the edit of the sample CSV never touches the repository (nor
another test's view of it). The emulator closes a batch each second and answers a fifth of the
requests ``invalid_request`` (a class not retried), so shards have failed rows and the
``failed_rows`` checks fail.

It clicks Materialize on ``grocery_catalog`` and then on ``product_attributes/input_shards``,
waits for the merged output and the automation sensor's ``category_report``, and saves the
lineage, runs, merged (and its checks), raw_responses (its partitions and per-shard checks),
submissions, automation and category_report pages. Then it appends a row to the copied CSV,
waits for the watch and the automation to show ``input_shards`` stale, and saves those pages.

What it saw (the checks' states and descriptions read over Dagster's GraphQL API, the merged
output's figures, each page's loaded text) goes to ``walk.json`` in the output folder.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("maple_engine", "maple_assets", "resources", "partitions", "emulator")
JOB = ["product_attributes"]
FAULT = "invalid_request"  # final at once (not retried): one round of batches
NEW_ITEM = "SKU-19999,Maple Farm Rye loaf 500 g,A dense rye loaf.,Bakery,3.10\n"
CHECKS = """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
  ... on AssetNode { assetChecksOrError { ... on AssetChecks { checks { name description
    executionForLatestMaterialization { status evaluation { severity description } } } } } } } }"""
EXECUTIONS = """query($path: [String!]!, $name: String!) {
  assetCheckExecutions(assetKey: {path: $path}, checkName: $name, limit: 50) {
    status partition evaluation { severity description } } }"""
LATEST = """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
  ... on AssetNode { EVENTS(limit: 1) { runId partition timestamp
    metadataEntries { label ... on IntMetadataEntry { intValue }
      ... on FloatMetadataEntry { floatValue } ... on TextMetadataEntry { text } } } } } }"""
PARTITIONS = """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
  ... on AssetNode { assetPartitionStatuses { ... on DefaultPartitionStatuses {
    materializedPartitions failedPartitions materializingPartitions } } } } }"""
STALE = """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
  ... on AssetNode { staleStatus staleCauses { reason } } } }"""
RUNS = """{ runsOrError(limit: 100) { ... on Runs { results { runId status tags { key value }
  assetSelection { path } creationTime startTime endTime } } } }"""
TICKS = """query($name: String!) { sensorOrError(sensorSelector: {repositoryLocationName: "maple",
  repositoryName: "__repository__", sensorName: $name}) { ... on Sensor { sensorState {
    ticks(limit: 200) { status timestamp endTimestamp runIds } } } } }"""
SENSORS = ("product_attributes_sensor", "maple_automation")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def graphql(base: str, query: str, **variables: Any) -> Any:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        base + "/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


def wait_for(what: str, done: Callable[[], Any], seconds: float) -> Any:
    """Poll ``done`` every 2 s until it returns something truthy; None after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        time.sleep(2)
    print(f"ui_walk: {what}: not within {seconds:.0f} s", file=sys.stderr)
    return None


def checks(base: str, path: list[str]) -> list[dict[str, Any]]:
    node = graphql(base, CHECKS, path=path)["assetNodeOrError"]
    return node["assetChecksOrError"]["checks"]  # type: ignore[no-any-return]


def executions(base: str, path: list[str], name: str) -> list[dict[str, Any]]:
    return graphql(base, EXECUTIONS, path=path, name=name)["assetCheckExecutions"]  # type: ignore[no-any-return]


def latest(
    base: str, path: list[str], events: str = "assetMaterializations"
) -> dict[str, Any] | None:
    """The asset's newest materialization (or observation, ``events="assetObservations"``):
    its run, partition and metadata as a dict."""
    query = LATEST.replace("EVENTS", events)
    found = graphql(base, query, path=path)["assetNodeOrError"][events]
    if not found:
        return None
    entries = found[0]["metadataEntries"]
    values = {e["label"]: e.get("intValue", e.get("floatValue", e.get("text"))) for e in entries}
    stored = float(found[0]["timestamp"]) / 1000  # epoch milliseconds
    return {"run_id": found[0]["runId"], "partition": found[0]["partition"], "at": stored, **values}


def stale(base: str, path: list[str]) -> dict[str, Any]:
    return graphql(base, STALE, path=path)["assetNodeOrError"]  # type: ignore[no-any-return]


def timeline(base: str, since: float) -> dict[str, Any]:
    """From the click on ``input_shards`` (``since``, epoch seconds): each run's creation,
    start and end and each enrichment and automation sensor tick [start, end, status, runs], in
    seconds after the click."""

    def at(stamp: float | None) -> float | None:
        return None if stamp is None else round(stamp - since, 1)

    runs = [
        {
            "assets": ",".join(sorted(a["path"][-1] for a in run["assetSelection"] or [])),
            "partition": run_tags_of(run).get("dagster/partition", ""),
            "created": at(run["creationTime"]),
            "started": at(run["startTime"]),
            "ended": at(run["endTime"]),
        }
        for run in graphql(base, RUNS)["runsOrError"]["results"]
        if run["creationTime"] >= since - 5
    ]
    ticks = {
        name: [
            [at(t["timestamp"]), at(t["endTimestamp"]), t["status"], len(t["runIds"])]
            for t in graphql(base, TICKS, name=name)["sensorOrError"]["sensorState"]["ticks"]
            if t["timestamp"] >= since - 5
        ]
        for name in SENSORS
    }
    return {
        "runs": sorted(runs, key=lambda r: r["created"]),
        "ticks": {k: sorted(v) for k, v in ticks.items()},
    }


def run_tags_of(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def click_materialize(page: Any, path: str, base: str) -> float:
    """Click Materialize on ``path`` (and confirm, if a dialog asks): the time of the click
    that launched the run (epoch seconds)."""
    page.goto(base + path)
    page.get_by_role("button", name="Materialize").first.wait_for(timeout=30000)
    page.get_by_role("button", name="Materialize").first.click()
    clicked = time.time()
    page.wait_for_timeout(2000)
    for label in ("Confirm", "Launch run", "Materialize"):  # a dialog may ask to confirm
        button = page.get_by_role("dialog").get_by_role("button", name=label)
        if button.count():
            button.first.click()
            return time.time()
    return clicked


@dataclasses.dataclass
class Camera:
    """The browser page on the UI at ``base``: screenshots into ``out``, what each page showed
    into ``seen``."""

    page: Any
    base: str
    out: Path
    seen: dict[str, Any]

    def shoot(self, name: str, path: str) -> None:
        """Open ``path``, wait for the page to settle, save ``name``.png and its text."""
        self.page.goto(self.base + path)
        self.page.wait_for_load_state("networkidle")
        self.page.wait_for_timeout(2500)
        self.save(name)

    def open_check(self, name: str, asset: str, tab: str = "") -> None:
        """The ``failed_rows`` check of ``asset`` opened from its checks tab (and its ``tab``)."""
        self.page.goto(f"{self.base}{asset}?view=checks")
        self.page.wait_for_load_state("networkidle")
        self.page.get_by_text("failed_rows", exact=True).first.click()
        self.page.wait_for_timeout(2000)
        if tab:
            self.page.get_by_role("tab", name=tab).last.click()  # the check's, not the asset's
            self.page.wait_for_timeout(2500)
        self.save(name)

    def save(self, name: str) -> None:
        self.page.screenshot(path=str(self.out / f"{name}.png"))
        text = self.page.inner_text("body")[:4000]
        self.seen["pages"][name] = {"url": self.page.url, "text": text}


def open_ui(pw: Any, base: str) -> tuple[Any, Any]:
    """Debian's Chromium, headless, on the UI's lineage page past Dagster's first-visit modal:
    the browser and its page."""
    browser = pw.chromium.launch(
        executable_path="/usr/bin/chromium",
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    page.goto(base + "/asset-groups")
    page.wait_for_timeout(3000)
    skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit newsletter modal
    if skip.count():
        skip.first.click()
    return browser, page


def walk(out: Path, catalog: Path, base: str, seen: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright  # type: ignore[import-not-found]  # test-only

    with sync_playwright() as pw:
        browser, page = open_ui(pw, base)
        camera = Camera(page, base, out, seen)
        before(camera)
        click_materialize(page, "/assets/grocery_catalog", base)
        wait_for("grocery_catalog", lambda: latest(base, ["grocery_catalog"]), 60)
        clicked = click_materialize(page, "/assets/product_attributes/input_shards", base)
        seen["merged"] = wait_for("merged", lambda: latest(base, [*JOB, "merged"]), 180)
        seen["timeline"] = timeline(base, clicked)
        seen["merged_after_s"] = seen["merged"] and round(seen["merged"]["at"] - clicked, 1)
        print(f"ui_walk: click to merged in {seen['merged_after_s']} s")
        seen["category_report"] = wait_for(
            "category_report", lambda: latest(base, ["category_report"]), 60
        )
        after(camera)
        with catalog.open("a") as handle:  # an edit: one more item
            handle.write(NEW_ITEM)
        shard_path = [*JOB, "input_shards"]
        seen["stale_after_edit"] = wait_for(
            "input_shards stale", lambda: stale(base, shard_path)["staleStatus"] == "STALE", 150
        )
        camera.shoot("12_lineage_after_edit", "/asset-groups")
        camera.shoot("13_input_shards_stale", "/assets/product_attributes/input_shards")
        seen["runs"] = graphql(base, RUNS)["runsOrError"]["results"]
        browser.close()


def before(camera: Camera) -> None:
    """The lineage and the checks before anything ran."""
    camera.shoot("01_lineage", "/asset-groups")
    camera.shoot("02_checks_before", "/assets/product_attributes/merged?view=checks")
    merged, raw = [*JOB, "merged"], [*JOB, "raw_responses"]
    camera.seen["checks_before"] = checks(camera.base, merged) + checks(camera.base, raw)


def after(camera: Camera) -> None:
    """The checks' states (over GraphQL) and the pages once merged and its report are in."""
    base, seen = camera.base, camera.seen
    merged, raw = [*JOB, "merged"], [*JOB, "raw_responses"]
    seen["checks_after"] = {"merged": checks(base, merged), "raw_responses": checks(base, raw)}
    seen["shard_checks"] = executions(base, raw, "failed_rows")
    # a shard past error_failed_share is not materialized: its figures are an observation
    seen["shard_latest"] = latest(base, raw) or latest(base, raw, "assetObservations")
    seen["shard_partitions"] = graphql(base, PARTITIONS, path=raw)["assetNodeOrError"][
        "assetPartitionStatuses"
    ]
    shards = "/assets/product_attributes/raw_responses"
    for name, path in (
        ("03_runs", "/runs"),
        ("04_merged", "/assets/product_attributes/merged"),
        ("06_submissions", "/assets/product_attributes/submissions?view=partitions"),
        ("07_category_report", "/assets/category_report"),
        ("08_automation", "/automation"),
        ("05_raw_responses_partitions", f"{shards}?view=partitions"),
    ):
        camera.shoot(name, path)
    camera.page.get_by_text("s00000", exact=True).first.click()  # its materialization, checks
    camera.page.wait_for_timeout(2500)
    camera.save("05_raw_responses_s00000")
    camera.open_check("09_merged_failed_rows", "/assets/product_attributes/merged")
    camera.open_check("10_shard_failed_rows", shards)
    camera.open_check("11_shard_failed_rows_partitions", shards, "Partitions")


def project_copy(work: Path) -> Path:
    """The repository's packages and workspace in ``work/project``: what ``dagster dev`` loads."""
    project = work / "project"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(REPO / package, project / package, ignore=ignore)
    for name in ("workspace.yaml", "pyproject.toml"):
        shutil.copy(REPO / name, project / name)
    return project


@contextlib.contextmanager
def dev_stack(work: Path, bin_dir: Path, emulator_args: list[str]) -> Iterator[tuple[Path, str]]:
    """The emulator and ``maple dev`` (the README's ``dagster dev`` for scripts) over a copy
    of the project in ``work``, with no provider key: yields the copy and the UI's base URL
    once it answers; stops both on the way out (their logs stay in ``work``)."""
    project = project_copy(work)
    (work / "home").mkdir()
    # the instance `dagster dev` makes from the project folder's dagster.yaml, kept after it stops
    instance = (REPO / "dagster.yaml").read_text() + "\ntelemetry:\n  enabled: false\n"
    (work / "home" / "dagster.yaml").write_text(instance)
    dev = [str(bin_dir / "maple"), "dev", "-h", "127.0.0.1", "-p"]
    copy = {"PYTHONPATH": str(project)}  # the copy, not the installed repository
    with serving(work, bin_dir, emulator_args, dev, cwd=project, more_env=copy) as base:
        yield project, base


@contextlib.contextmanager
def serving(
    work: Path,
    bin_dir: Path,
    emulator_args: list[str],
    dev_command: list[str],
    *,
    cwd: Path,
    more_env: dict[str, str],
) -> Iterator[str]:
    """The emulator and ``dev_command`` (its port appended) run in ``cwd`` on the instance in
    ``work/home`` and the storage root ``work/store``, with no provider key and ``more_env``:
    yields the UI's base URL once it answers; stops both on the way out (the dev command's
    whole process group: its code servers too; their logs stay in ``work``)."""
    emulator_port, ui_port = free_port(), free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(work / "home"),
        "MAPLE_STORAGE": str(work / "store"),
        "MAPLE_EMULATOR_URL": f"http://127.0.0.1:{emulator_port}",
        **more_env,
    }
    for key in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        env.pop(key, None)
    with open(work / "emulator.log", "w") as elog, open(work / "dev.log", "w") as dlog:
        emulator = subprocess.Popen(
            [bin_dir / "maple", "emulator", "--port", str(emulator_port), *emulator_args],
            cwd=cwd, env=env, stdout=elog, stderr=subprocess.STDOUT,
        )  # fmt: skip
        dev = subprocess.Popen(
            [*dev_command, str(ui_port)],
            cwd=cwd, env=env, stdout=dlog, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{ui_port}"
        try:
            for _ in range(240):
                try:
                    urllib.request.urlopen(base + "/server_info", timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            yield base
        finally:
            os.killpg(dev.pid, signal.SIGTERM)
            emulator.terminate()
            try:
                dev.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(dev.pid, signal.SIGKILL)
            emulator.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="ui-shots", type=Path)
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                        help="folder of the maple and dagster commands")  # fmt: skip
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ui-walk-"))
    seen: dict[str, Any] = {"pages": {}, "work": str(work)}
    emulator_args = ["--batch-seconds", "1", "--fail", f"{FAULT}=0.2"]
    try:
        with dev_stack(work, args.bin, emulator_args) as (project, base):
            walk(out, project / "maple_assets" / "data" / "grocery_catalog.csv", base, seen)
    finally:
        (out / "walk.json").write_text(json.dumps(seen, indent=1))
        print("screenshots and walk.json in", out, "- logs in", work)


if __name__ == "__main__":
    main()
