"""Walk a NEW ``dg`` project in the Dagster UI as its team would: ``create-dagster project``,
``dg scaffold defs maple_assets.EnrichmentComponent``, the settings ``docs/components.md`` tells a
new project to make, ``dg dev``, then in headless Chromium: the global "Materialize all" (its
dialog, no daily picker; the run or backfill it launches, to ``merged``), the Partitions tab of
``raw_responses`` with the shards past ``error_failed_share`` failed, and after an edit of the
input a second "Materialize all" (a new version) whose ``input_shards`` links the first
version's runs.

    python scripts/ui_walk_dg.py /tmp/shots --create-dagster PATH [--bin DIR]

As ``scripts/ui_walk.py``: only Playwright runs in this script's Python; ``maple``, ``dg`` and
the project's Python are those of ``--bin``; Maple's packages are a COPY of the repository's
(``PYTHONPATH``), the instance, storage root and project are throwaway folders. What it saw goes
to ``walk.json`` in the output folder, beside the screenshots.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ui_walk import (  # the sample's walk, beside this script
    PARTITIONS,
    RUNS,
    Camera,
    executions,
    graphql,
    latest,
    open_ui,
    project_copy,
    serving,
    wait_for,
)

JOB = "item_tags"
PROJECT = "shop-tags"
MODULE = "shop_tags"
ROWS = 40
FAULT = "invalid_request"  # final at once: shards over error_failed_share stay failed
BACKFILLS = """{ partitionBackfillsOrError(limit: 10) { ... on PartitionBackfills {
  results { id status numPartitions } } } }"""
# docs/components.md, "In a new dg project": the instance settings that make small jobs fast
INSTANCE = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
sensors:
  use_threads: true
  num_workers: 4
telemetry:
  enabled: false
"""
# docs/components.md: steps in the run's process, and the automation sensor on
DEFINITIONS = """
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    found = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    return dg.Definitions.merge(found, dg.Definitions(executor=dg.in_process_executor))
"""
TUNING = (
    "  provider: emulator\n  max_requests_per_batch: 10\n  error_failed_share: 0.25\n"
    "  poll_interval_s: 4\n"
)


def new_project(work: Path, bin_dir: Path, create_dagster: Path) -> Path:
    """``create-dagster project`` and ``dg scaffold defs`` as a user types them, the input file
    and the documented settings; the project's folder."""
    subprocess.run(
        [create_dagster, "project", PROJECT, "--no-uv-sync"], cwd=work, check=True,
        capture_output=True,
    )  # fmt: skip
    project = work / PROJECT
    (project / "data").mkdir()
    rows = [f"sku-{i},item {i}\n" for i in range(ROWS)]
    (project / "data" / "items.csv").write_text("sku,title\n" + "".join(rows))
    subprocess.run(
        [bin_dir / "dg", "scaffold", "defs", "maple_assets.EnrichmentComponent", JOB,
         "--source", "data/items.csv", "--prompt", "Tag {title}", "--model", "gpt-4o-mini"],
        cwd=project, check=True, capture_output=True, env=project_env(work, project, bin_dir),
    )  # fmt: skip
    defs_yaml = project / "src" / MODULE / "defs" / JOB / "defs.yaml"
    written = defs_yaml.read_text()
    marker = "\n  # Optional, each at its default:"
    defs_yaml.write_text(written.replace(marker, "\n" + TUNING.rstrip("\n") + marker, 1))
    (project / "src" / MODULE / "definitions.py").write_text(textwrap.dedent(DEFINITIONS))
    return project


def project_env(work: Path, project: Path, bin_dir: Path) -> dict[str, str]:
    """What the project runs with: the copy of Maple's packages and the project's source on
    the path, ``--bin``'s virtual environment active (``dg dev --use-active-venv``)."""
    import os

    return {
        **os.environ,
        "PYTHONPATH": f"{work / 'project'}:{project / 'src'}",
        "VIRTUAL_ENV": str(bin_dir.parent),
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "DAGSTER_HOME": str(work / "home"),
    }


def materialize_all(camera: Camera, name: str) -> dict[str, Any]:
    """Click the global lineage's "Materialize all", save its dialog as ``name``, launch it:
    what the dialog said and when it was launched. With partitions to pick, it picks "All"
    (saved as ``name``_all)."""
    page = camera.page
    page.goto(camera.base + "/asset-groups")
    page.wait_for_load_state("networkidle")
    page.get_by_role("button", name="Materialize all").first.click()
    page.wait_for_timeout(3000)
    dialog = page.get_by_role("dialog")
    said = dialog.inner_text() if dialog.count() else ""
    camera.save(name)
    every = dialog.get_by_role("button", name="All", exact=True)
    if dialog.count() and every.count():  # the shards: all of them (it opens on "Custom")
        every.first.click()
        page.wait_for_timeout(1500)
        camera.save(f"{name}_all")
    launched = time.time()
    launch = dialog.get_by_role("button", name=re.compile(r"^Launch"))  # "Launch 1 run", ...
    if dialog.count() and launch.count():
        launch.first.click()
    page.wait_for_timeout(2000)
    return {"dialog": said, "launched": launched}


def merged_after(base: str, since: float, seconds: float) -> dict[str, Any]:
    """The first materialization of ``merged`` after ``since``."""

    def newer() -> Any:
        found = latest(base, [JOB, "merged"])
        return found if found and found["at"] >= since else None

    return wait_for("merged", newer, seconds)  # type: ignore[no-any-return]


def settled(base: str, seconds: float) -> list[dict[str, Any]]:
    """The runs, once none is queued or running."""

    def done() -> Any:
        runs = graphql(base, RUNS)["runsOrError"]["results"]
        busy = [r for r in runs if r["status"] in ("QUEUED", "STARTING", "STARTED", "NOT_STARTED")]
        return runs if not busy else None

    return wait_for("runs to end", done, seconds) or []  # type: ignore[no-any-return]


def backfills(base: str, seconds: float) -> dict[str, Any]:
    """The backfills, once none is still requested (the daemon marks one done a tick after
    its last run)."""

    def done() -> Any:
        found = graphql(base, BACKFILLS)["partitionBackfillsOrError"]
        return found if all(b["status"] != "REQUESTED" for b in found["results"]) else None

    return wait_for("backfills to end", done, seconds) or {}  # type: ignore[no-any-return]


def walk(out: Path, project: Path, base: str, seen: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright  # type: ignore[import-not-found]  # test-only

    raw = [JOB, "raw_responses"]
    with sync_playwright() as pw:
        browser, page = open_ui(pw, base)
        camera = Camera(page, base, out, seen)
        camera.shoot("21_dg_lineage", "/asset-groups")
        first = materialize_all(camera, "22_dg_materialize_all_dialog")
        seen["first"] = first | {"merged": merged_after(base, first["launched"], 240)}
        seen["first"]["runs"] = settled(base, 120)
        seen["first"]["backfills"] = backfills(base, 120)
        seen["partitions"] = graphql(base, PARTITIONS, path=raw)["assetNodeOrError"][
            "assetPartitionStatuses"
        ]
        seen["shard_checks"] = executions(base, raw, "failed_rows")
        camera.shoot("23_dg_runs", "/runs")
        camera.shoot(
            "24_dg_raw_responses_partitions", f"/assets/{JOB}/raw_responses?view=partitions"
        )
        camera.shoot("25_dg_merged", f"/assets/{JOB}/merged")

        with (project / "data" / "items.csv").open("a") as handle:  # an edit: a new version
            handle.write("sku-new,a new item\n")
        second = materialize_all(camera, "26_dg_materialize_all_again")
        seen["second"] = second | {"merged": merged_after(base, second["launched"], 240)}
        seen["second"]["runs"] = settled(base, 120)
        seen["second"]["backfills"] = backfills(base, 120)
        seen["input_shards"] = latest(base, [JOB, "input_shards"])
        camera.shoot("27_dg_input_shards", f"/assets/{JOB}/input_shards")
        link = page.get_by_role("link", name="version 1: its runs, shards and figures")
        seen["history_link"] = link.count()
        if link.count():
            link.first.click()
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(2500)
            camera.save("28_dg_version_1_runs")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="ui-shots-dg", type=Path)
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                        help="folder of the maple and dg commands")  # fmt: skip
    parser.add_argument("--create-dagster", type=Path, required=True,
                        help="the create-dagster command")  # fmt: skip
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ui-walk-dg-"))
    seen: dict[str, Any] = {"pages": {}, "work": str(work)}
    project_copy(work)
    (work / "home").mkdir()
    (work / "home" / "dagster.yaml").write_text(INSTANCE)
    project = new_project(work, args.bin, args.create_dagster)
    env = project_env(work, project, args.bin)
    more = {k: env[k] for k in ("PYTHONPATH", "VIRTUAL_ENV", "PATH")}
    dev = [str(args.bin / "dg"), "dev", "--use-active-venv", "-h", "127.0.0.1", "-p"]
    emulator_args = ["--batch-seconds", "1", "--fail", f"{FAULT}=0.3", "--seed", "3"]
    try:
        with serving(work, args.bin, emulator_args, dev, cwd=project, more_env=more) as base:
            walk(out, project, base, seen)
    finally:
        (out / "walk.json").write_text(json.dumps(seen, indent=1))
        print("screenshots and walk.json in", out, "- logs in", work)


if __name__ == "__main__":
    main()
