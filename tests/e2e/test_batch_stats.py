"""Batch history and ``maple stats`` as a user runs them: ``maple enrich`` against an emulator
whose batch durations spread and stall, then the table, the CSV, the PNGs and the HTML."""

import base64
import csv
import re
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import NO_OPENAI_KEY, maple

CSV_COLUMNS = [
    "provider", "model", "job", "team", "batch_id", "requests", "created_at", "completed_at",
    "status", "duration_s", "tasks_per_s",
]  # fmt: skip
PNG = b"\x89PNG\r\n\x1a\n"


pytestmark = pytest.mark.slow  # two jobs on a spreading emulator: about a minute


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Two jobs of 6 batches each through an emulator with spread-out durations."""
    tmp = tmp_path_factory.mktemp("stats")
    table = tmp / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(24)]}).write_csv(table)
    config = EmulatorConfig(batch_seconds=1.0, batch_seconds_spread=0.6, seed=3)
    with EmulatorServer(config) as server:
        for job, team in (("rye", "bakery"), ("wheat", "mill")):
            done = maple(
                "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
                "--provider", "emulator", "--storage", str(tmp / "store"), "--job", job,
                "--team", team, "--output", str(tmp / f"{job}.csv"),
                "--max-requests-per-batch", "4", "--poll-interval", "0.1", "--quiet",
                url=server.url, drop=NO_OPENAI_KEY,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        stats = server.stats()
    return tmp, stats


def test_every_batch_is_in_the_csv_with_its_turnaround(run: tuple[Path, dict[str, int]]) -> None:
    tmp, emulator_stats = run
    out = maple(
        "stats", "--storage", str(tmp / "store"), "--csv", str(tmp / "all.csv"), drop=NO_OPENAI_KEY
    )
    assert out.returncode == 0, out.stderr
    with (tmp / "all.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[: len(CSV_COLUMNS)] == CSV_COLUMNS
    assert len(rows) == emulator_stats["batches_created"] == 12
    assert {r["status"] for r in rows} == {"completed"}
    assert sum(int(r["requests"]) for r in rows) == 48
    durations = [float(r["duration_s"]) for r in rows]
    assert min(durations) >= 0 and len(set(durations)) > 1  # drawn, not one fixed figure
    for r in rows:
        if float(r["duration_s"]) > 0:
            assert float(r["tasks_per_s"]) == pytest.approx(
                int(r["requests"]) / float(r["duration_s"])
            )
        assert int(r["prompt_tokens"]) > 0  # the billed input tokens of the attempt
    assert {(r["job"], r["team"]) for r in rows} == {("rye", "bakery"), ("wheat", "mill")}
    header, _rule, line = out.stdout.splitlines()[:3]
    assert header.split()[:4] == ["provider", "model", "batches", "completed"]
    assert line.split()[:4] == ["emulator", "gpt-4o-mini", "12", "12"]
    assert "turnaround_p50" in header and "tasks/s_p99" in header


def test_filters_charts_and_the_self_contained_report(run: tuple[Path, dict[str, int]]) -> None:
    tmp, _ = run
    out = maple(
        "stats", "--storage", str(tmp / "store"), "--job", "rye", "--team", "bakery",
        "--provider", "emulator", "--since", "2020-01-01", "--csv", str(tmp / "rye.csv"),
        "--png", str(tmp / "charts"), "--html", str(tmp / "report.html"), drop=NO_OPENAI_KEY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert pl.read_csv(tmp / "rye.csv")["job"].unique().to_list() == ["rye"]
    assert out.stdout.splitlines()[2].split()[2] == "6"
    names = sorted(p.name for p in (tmp / "charts").iterdir())
    assert names == ["completion_times.png", "size_vs_completion.png", "tasks_per_s.png"]
    for path in (tmp / "charts").iterdir():
        assert path.read_bytes().startswith(PNG) and path.stat().st_size > 10_000
    page = (tmp / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3 and all(base64.b64decode(i).startswith(PNG) for i in images)
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing outside the page
    assert "job rye" in page and "<td>emulator</td>" in page


def test_nothing_matching_and_an_unwritable_target(run: tuple[Path, dict[str, int]]) -> None:
    tmp, _ = run
    none = maple(
        "stats", "--storage", str(tmp / "store"), "--provider", "nobody", drop=NO_OPENAI_KEY
    )
    assert none.returncode == 0 and none.stdout.strip() == "No batches recorded (provider nobody)."
    (tmp / "blocker").write_text("a file, not a folder")
    bad = maple(
        "stats",
        "--storage",
        str(tmp / "store"),
        "--png",
        str(tmp / "blocker" / "x"),
        drop=NO_OPENAI_KEY,
    )
    assert bad.returncode == 2
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("error: --png ") and "writable" in line
    wrong_day = maple(
        "stats", "--storage", str(tmp / "store"), "--since", "yesterday", drop=NO_OPENAI_KEY
    )
    assert wrong_day.returncode == 2 and "--since" in wrong_day.stderr
