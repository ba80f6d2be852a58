"""The progress report of ``maple enrich``: plain lines off a terminal, a rich bar on one."""

import io
import time

import pytest
from rich.console import Console

from maple_assets.api.progress import Counts, Progress


def test_plain_line_has_shards_rows_rate_time_left_and_spend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = Progress(terminal=False)
    p.started = time.monotonic() - 10.0
    p.counts = Counts(
        total_shards=4, submitted=3, finished=1, total_rows=400, rows_done=100, spent_usd=0.0123
    )
    p.show()
    line = capsys.readouterr().err.strip()
    assert "shards submitted 3/4  finished 1/4  rows done 100/400" in line
    assert "10 rows/s" in line and "left ~30s" in line and "spent 0.012300 USD" in line


def test_plain_lines_only_when_something_changed(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress(terminal=False)
    p.counts = Counts(total_shards=2, submitted=1, total_rows=10)
    p.show()
    p.show()  # the same counts: no second line
    p.counts = Counts(total_shards=2, submitted=2, total_rows=10)
    p.show()
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_quiet_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress(quiet=True, terminal=False)
    p.counts = Counts(total_shards=1, total_rows=5)
    p.show()
    assert capsys.readouterr().err == ""


def test_terminal_bar_draws_rows_shards_and_spend(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    import rich.progress

    real = rich.progress.Progress
    monkeypatch.setattr(
        rich.progress, "Progress", lambda *a, **k: real(*a, **{**k, "console": console})
    )
    p = Progress(terminal=True)
    p.counts = Counts(
        total_shards=2, submitted=2, finished=1, total_rows=10, rows_done=5, spent_usd=0.5
    )
    p.show()
    p.close()
    drawn = out.getvalue()
    assert "5/10" in drawn and "shards 1/2 done, 2 sent" in drawn and "spent 0.500000 USD" in drawn


def test_plain_line_shows_the_expected_finish(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress(terminal=False)
    now = time.time()
    p.counts = Counts(
        total_shards=2, submitted=2, total_rows=10, eta_p50=now + 65, eta_p90=now + 130
    )
    p.show()
    line = capsys.readouterr().err
    assert "finish p50 ~1m0" in line and "p90 ~2m" in line
    p.counts = Counts(
        total_shards=2, submitted=2, total_rows=10, eta_p50=now + 60, eta_p90=now + 99
    )
    p.show()  # only the estimate moved: no new line
    assert capsys.readouterr().err == ""
