"""The UI walk (``scripts/ui_walk.py``): ``dagster dev`` and the emulator driven through headless
Chromium as a person would, over a copy of the project. Asserts on what it saw: every page
loaded, the checks read "Not evaluated" (and say so) before anything ran, each shard's
``failed_rows`` check failed naming the failure class and count, each shard past
``error_failed_share`` a failed partition of ``raw_responses``, the merged output's figures,
``input_shards`` stale after the sample's edit, no failed run but the collects naming those
shards, and the repository's sample unchanged.

Playwright is a test-only program in its own virtualenv (``.ci/run`` installs it, pinned):
``MAPLE_TEST_PLAYWRIGHT_PYTHON`` names that Python; the browser is Debian's ``/usr/bin/chromium``.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the walk: ~4 min, once

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ui_walk.py"
SAMPLE = REPO / "maple_assets" / "data" / "grocery_catalog.csv"
PYTHON = os.environ.get("MAPLE_TEST_PLAYWRIGHT_PYTHON", "")
CHROMIUM = Path("/usr/bin/chromium")
FAILED = re.compile(
    r"^(\d+) of (\d+) rows failed \([\d.]+%; allowed [\d.]+%\): invalid_request: (\d+)"
)


def _missing() -> str:
    if not PYTHON or not Path(PYTHON).exists():
        return (
            "Playwright's Python is not installed "
            "(.ci/run installs it; MAPLE_TEST_PLAYWRIGHT_PYTHON names it)"
        )
    if not CHROMIUM.exists():
        return "no /usr/bin/chromium (apt-get install chromium)"
    return ""


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if _missing():
        pytest.skip(_missing())
    out = tmp_path_factory.mktemp("ui-walk")
    sample = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    bin_dir = str(Path(sys.executable).parent)
    walk = subprocess.run(
        [PYTHON, str(SCRIPT), str(out), "--bin", bin_dir],
        capture_output=True, text=True, timeout=420, check=False,
    )  # fmt: skip
    assert walk.returncode == 0, walk.stderr[-3000:]
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() == sample  # the walk edits a copy
    found: dict[str, Any] = json.loads((out / "walk.json").read_text())
    found["shots"] = sorted(p.stem for p in out.glob("*.png"))
    return found


def test_every_page_loaded(seen: dict[str, Any]) -> None:
    assert len(seen["shots"]) == 14 and set(seen["pages"]) == set(seen["shots"])
    for name, page in seen["pages"].items():
        assert "Something went wrong" not in page["text"], name
    assert "raw_responses" in seen["pages"]["05_raw_responses_partitions"]["text"]
    assert "Not Evaluated" in seen["pages"]["02_checks_before"]["text"]
    assert "Failed" in seen["pages"]["10_shard_failed_rows"]["text"]


def test_the_checks_partitions_page_shows_every_shard_failed(seen: dict[str, Any]) -> None:
    """The per-shard check's Partitions tab counts each shard Failed (not Missing)."""
    text = seen["pages"]["11_shard_failed_rows_partitions"]["text"]
    failed = re.search(r"(?<!Execution )Failed \((\d+)\)", text)
    missing = re.search(r"Missing \((\d+)\)", text)
    shards = {e["partition"] for e in seen["shard_checks"]}
    assert failed is not None and int(failed[1]) == len(shards), text[:800]
    assert missing is not None and missing[1] == "0", text[:800]


def test_checks_that_have_not_run_say_so(seen: dict[str, Any]) -> None:
    names = {c["name"] for c in seen["checks_before"]}
    merged = {"every_row_once", "same_rows_as_input", "every_row_final", "failed_rows"}
    assert names == merged | {"no_missing_lines"}  # raw_responses': failed_rows and this one
    for check in seen["checks_before"]:
        assert check["executionForLatestMaterialization"] is None, check
        assert "; until then, not yet evaluated." in check["description"], check


def test_each_shard_partition_shows_its_failed_rows(seen: dict[str, Any]) -> None:
    """Every shard's failed_rows check failed, on its own partition, with Dagster's severity
    and a description naming the class and count; the latest shard's materialization carries
    the same share."""
    latest: dict[str, dict[str, Any]] = {}
    for execution in seen["shard_checks"]:  # newest first
        latest.setdefault(execution["partition"], execution)
    assert sorted(latest) == [f"s{n:05d}" for n in range(len(latest))] and len(latest) >= 3
    for shard, execution in latest.items():
        assert execution["status"] == "FAILED", (shard, execution)
        assert execution["evaluation"]["severity"] == "ERROR"  # past error_failed_share (10%)
        said = FAILED.match(execution["evaluation"]["description"])
        assert said is not None and said[1] == said[3], execution
    shard = seen["shard_latest"]
    described = latest[shard["partition"]]["evaluation"]["description"]
    assert described.startswith(f"{shard['failed']} of {shard['rows']} rows failed")
    assert shard["failed_share"] == round(shard["failed"] / shard["rows"], 6) > 0


def test_merged_output_and_its_checks(seen: dict[str, Any]) -> None:
    merged = seen["merged"]
    assert merged is not None and merged["rows"] == 300
    assert merged["succeeded"] + merged["failed"] == 300 and 0 < merged["failed"] < 300
    checks = seen["checks_after"]["merged"]
    after = {c["name"]: c["executionForLatestMaterialization"] for c in checks}
    for name in ("every_row_once", "same_rows_as_input", "every_row_final"):
        assert after[name]["status"] == "SUCCEEDED", (name, after[name])
    failed_rows = after["failed_rows"]["evaluation"]["description"]
    assert failed_rows.startswith(f"{merged['failed']} of 300 rows failed"), failed_rows
    assert seen["category_report"] is not None


def test_one_click_reaches_merged_in_a_few_runs(seen: dict[str, Any]) -> None:
    """The sensor path carries the 300 rows from the click on input_shards to merged in a few
    runs: input_shards, the submissions, then runs that each collect the batches ended by one
    tick, the last of which also merges (four runs when every batch ends by one tick: 14.7-23.2
    s measured on two cores; the walk prints the figure). The bound here only catches a path
    gone slow again (it took 59-105 s in eight runs or more); speed is the walk's figure."""
    print(f"click to merged: {seen['merged_after_s']} s")
    runs = seen["timeline"]["runs"]
    stages = [
        r["assets"] for r in runs if r["assets"] not in ("grocery_catalog", "category_report")
    ]
    assert stages[0] == "input_shards" and "submissions" in stages, seen["timeline"]
    after = stages[stages.index("submissions") :]
    assert set(after) <= {"submissions", "raw_responses", "merged,raw_responses", "merged"}, stages
    assert after[-1] in ("merged,raw_responses", "merged") and len(stages) <= 6, stages
    assert seen["merged_after_s"] < 60, seen["timeline"]


def test_the_edit_shows_stale_and_no_run_failed(seen: dict[str, Any]) -> None:
    """No run failed but the collects of shards past error_failed_share, which name them."""
    assert seen["stale_after_edit"] is True
    failed = [r for r in seen["runs"] if r["status"] != "SUCCESS"]
    named = [r for r in failed if any(t["key"] == "maple/failed_shards" for t in r["tags"])]
    assert failed == named, failed


def test_shards_past_the_threshold_are_failed_partitions(seen: dict[str, Any]) -> None:
    """A fifth of the rows fail: each shard past error_failed_share (10%; its check ERROR) is
    Failed (red) on raw_responses' Partitions tab, not materialized (green)."""
    statuses = seen["shard_partitions"]
    latest: dict[str, dict[str, Any]] = {}
    for execution in seen["shard_checks"]:  # newest first
        latest.setdefault(execution["partition"], execution)
    past = sorted(s for s, e in latest.items() if e["evaluation"]["severity"] == "ERROR")
    assert past and sorted(statuses["failedPartitions"]) == past, statuses
    assert not set(past) & set(statuses["materializedPartitions"]), statuses
