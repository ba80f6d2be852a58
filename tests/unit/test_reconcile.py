"""Ledger vs provider per day and model: tolerances, date-stamped model names, one-sided rows."""

from datetime import date

import polars as pl
import pytest

from maple_engine.ledger.reconcile import REPORT_SCHEMA, Tolerance, compare, drift_lines

DAY = date(2026, 3, 1)


def frame(*rows: tuple[date, str, int, int, float]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=REPORT_SCHEMA, orient="row")


def test_within_either_tolerance_is_no_drift() -> None:
    ledger = frame((DAY, "m", 10, 5, 100.0), (DAY, "small", 1, 1, 0.001))
    provider = frame((DAY, "m", 10, 5, 100.9), (DAY, "small", 1, 1, 0.009))
    table = compare(ledger, provider, Tolerance())
    assert table["drifted"].to_list() == [False, False]  # 0.9% of $100; +$0.008 (800%)
    assert table["drift_usd"].to_list() == pytest.approx([0.9, 0.008])
    assert drift_lines(table) == []


def test_past_both_tolerances_is_drift_naming_day_and_model() -> None:
    table = compare(frame((DAY, "m", 10, 5, 1.0)), frame((DAY, "m", 10, 5, 1.02)), Tolerance())
    assert table["drifted"].to_list() == [True]
    assert drift_lines(table) == [
        "drift: 2026-03-01 m: ledger $1.000000, provider $1.020000 (+0.020000 USD, +2.00%)"
    ]
    loose = compare(frame((DAY, "m", 10, 5, 1.0)), frame((DAY, "m", 10, 5, 1.02)), Tolerance(5))
    assert loose["drifted"].to_list() == [False]


def test_snapshot_names_match_and_one_sided_rows_show() -> None:
    ledger = frame((DAY, "gpt-4o-mini", 10, 5, 1.0), (DAY, "claude-haiku-4-5-20251001", 3, 3, 1.0))
    provider = frame(
        (DAY, "gpt-4o-mini-2024-07-18", 10, 5, 1.0),
        (DAY, "claude-haiku-4-5", 3, 3, 1.0),
        (date(2026, 3, 2), "other", 1, 1, 0.5),
    )
    table = compare(ledger, provider, Tolerance())
    assert table.select("day", "model", "drifted").rows() == [
        (DAY, "claude-haiku-4-5", False),
        (DAY, "gpt-4o-mini", False),
        (date(2026, 3, 2), "other", True),
    ]
    assert table.row(2, named=True)["ledger_cost_usd"] == 0.0
    assert table.row(2, named=True)["drift_pct"] is None
    assert drift_lines(table) == [
        "drift: 2026-03-02 other: ledger $0.000000, provider $0.500000 (+0.500000 USD)"
    ]
