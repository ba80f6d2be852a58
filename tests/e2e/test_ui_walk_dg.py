"""The UI walk on a NEW ``dg`` project (``scripts/ui_walk_dg.py``): ``create-dagster project``,
``dg scaffold defs maple_assets.EnrichmentComponent``, the settings ``docs/components.md`` names,
``dg dev``, then in Chromium: the global "Materialize all" offers the shards (no daily picker)
and its run succeeds to ``merged``; the shards past ``error_failed_share`` are failed partitions;
after an edit a second "Materialize all" makes version 2, whose ``input_shards`` links version
1's runs.

Needs Playwright's Python (``MAPLE_TEST_PLAYWRIGHT_PYTHON``), Debian's ``/usr/bin/chromium`` and
the ``create-dagster`` command (``MAPLE_TEST_CREATE_DAGSTER``; ``pip install create-dagster``
in any virtualenv)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_ui_walk import PYTHON
from tests.e2e.test_ui_walk import _missing as sample_walk_missing

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the walk: ~5 min, once

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ui_walk_dg.py"
CREATE = os.environ.get("MAPLE_TEST_CREATE_DAGSTER", "")
SHOTS = {
    "21_dg_lineage",
    "22_dg_materialize_all_dialog",
    "22_dg_materialize_all_dialog_all",
    "23_dg_runs",
    "24_dg_raw_responses_partitions",
    "25_dg_merged",
    "26_dg_materialize_all_again",
    "26_dg_materialize_all_again_all",
    "27_dg_input_shards",
    "28_dg_version_1_runs",
}


def _missing() -> str:
    if not CREATE or not Path(CREATE).exists():
        return "no create-dagster (MAPLE_TEST_CREATE_DAGSTER names it)"
    return sample_walk_missing()  # Playwright's Python and Debian's chromium


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if _missing():
        pytest.skip(_missing())
    out = tmp_path_factory.mktemp("ui-walk-dg")
    bin_dir = str(Path(sys.executable).parent)
    walk = subprocess.run(
        [PYTHON, str(SCRIPT), str(out), "--bin", bin_dir, "--create-dagster", CREATE],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert walk.returncode == 0, walk.stderr[-3000:]
    found: dict[str, Any] = json.loads((out / "walk.json").read_text())
    found["shots"] = {p.stem for p in out.glob("*.png")}
    print("screenshots in", out)
    return found


def _failed_for_shards(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that did not succeed, but for the collects naming shards past the threshold."""
    failed = [r for r in runs if r["status"] != "SUCCESS"]
    return [r for r in failed if all(t["key"] != "maple/failed_shards" for t in r["tags"])]


def test_every_page_loaded(seen: dict[str, Any]) -> None:
    assert seen["shots"] == SHOTS
    for name, page in seen["pages"].items():
        assert "Something went wrong" not in page["text"], name


def test_materialize_all_offers_the_shards_not_a_daily_picker(seen: dict[str, Any]) -> None:
    for round_ in ("first", "second"):
        dialog = seen[round_]["dialog"]
        assert "Partition selection" in dialog, dialog
        assert not re.search(r"\d{4}-\d{2}-\d{2}", dialog), dialog  # no dates to pick
    chosen = seen["pages"]["22_dg_materialize_all_dialog_all"]["text"]
    assert "1 partition" in chosen and "Launch 1 run" in chosen, chosen[:1500]


def test_each_materialize_all_reaches_merged_and_its_runs_succeed(seen: dict[str, Any]) -> None:
    for round_ in ("first", "second"):
        assert seen[round_]["merged"] is not None, round_
        assert _failed_for_shards(seen[round_]["runs"]) == [], round_
        backfills = seen[round_]["backfills"]["results"]
        assert all(b["status"] == "COMPLETED_SUCCESS" for b in backfills), backfills
    assert seen["first"]["merged"]["rows"] == 40 and seen["second"]["merged"]["rows"] == 41


def test_shards_past_the_threshold_are_failed_partitions(seen: dict[str, Any]) -> None:
    latest: dict[str, dict[str, Any]] = {}
    for execution in seen["shard_checks"]:  # newest first; the stand-in's is skipped
        if execution["evaluation"] is not None:
            latest.setdefault(execution["partition"], execution)
    past = sorted(s for s, e in latest.items() if e["evaluation"]["severity"] == "ERROR")
    statuses = seen["partitions"]
    assert past and sorted(statuses["failedPartitions"]) == past, (statuses, latest)
    text = seen["pages"]["24_dg_raw_responses_partitions"]["text"]
    assert re.search(rf"Failed \({len(past)}\)", text), text[:1500]


def test_the_new_version_links_the_earlier_versions_runs(seen: dict[str, Any]) -> None:
    assert seen["input_shards"]["version"] == 2 and seen["history_link"] == 1
    page = seen["pages"]["28_dg_version_1_runs"]
    assert "maple%2Fversion%3D1" in page["url"] or "maple/version=1" in page["url"], page["url"]
    assert "maple/version=1" in page["text"] or "maple/version: 1" in page["text"], page["text"][
        :1500
    ]
