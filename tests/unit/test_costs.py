"""The cost ledger on SQLite: idempotent records, reconciliation with rows, reports, the CLI."""

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from maple_assets.cli.costs import costs_command
from maple_assets.wiring import cost_ledger
from maple_engine.errors import StorageError
from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.costs import CostLedger, default_sqlite_path
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice, cost_expr
from maple_engine.ledger.schema import (
    VERSION_TABLE,
    current_revision,
    head_revision,
    metadata,
    migrate,
)

REPO = Path(__file__).parents[2]
PRICE = ModelPrice(0.15, 0.6, 0.075, 0.15, source="test")


@pytest.fixture(autouse=True)
def _no_ambient_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAPLE_COST_DB", raising=False)
    monkeypatch.delenv("MAPLE_STORAGE", raising=False)


@pytest.fixture
def tracker(tmp_path: Path) -> Iterator[CostLedger]:
    with CostLedger(storage_root=str(tmp_path / "store")) as t:
        yield t


def entry(
    job: str = "job-a",
    shard: str = "0",
    attempt: int = 0,
    *,
    team: str = "catalog",
    model: str = "gpt-4o-mini",
    requests: int = 10,
    cost: float = 0.5,
    realtime: float = 1.0,
    day: date = date(2026, 11, 2),
) -> AttemptCost:
    return AttemptCost(
        job=job,
        team=team,
        model=model,
        provider="openai",
        mode="batch",
        shard=shard,
        attempt=attempt,
        batch_id=f"batch_{job}_{shard}_{attempt}",
        requests=requests,
        input_tokens=requests * 100,
        cached_input_tokens=requests * 10,
        cache_write_tokens=0,
        output_tokens=requests * 20,
        cost_usd=cost,
        realtime_cost_usd=realtime,
        recorded_at=datetime(day.year, day.month, day.day, 12, 30, tzinfo=UTC),
    )


def seed(tracker: CostLedger) -> None:
    tracker.record_many(
        [
            entry("job-a", "0", day=date(2026, 11, 1)),
            entry("job-a", "1", day=date(2026, 11, 2)),
            entry("job-b", "0", team="search", model="claude-haiku-4-5", cost=2.0, realtime=4.0),
            entry("job-c", "0", team="search", requests=5, cost=0.25, realtime=0.25),
        ]
    )


# -- storage location ------------------------------------------------------------------------


def test_default_ledger_is_sqlite_under_the_storage_root(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with CostLedger(storage_root=str(root)) as tracker:
        assert tracker.resolved_url() == f"sqlite:///{root.resolve()}/costs.sqlite"
        assert tracker.report() == []
        assert not root.exists(), "reading an empty ledger must not create files"
        tracker.record(entry())
    assert (root / "costs.sqlite").is_file()


def test_database_url_then_env_then_storage_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger takes plain values; ``MAPLE_COST_DB`` reaches it through the entry points."""
    explicit = f"sqlite:///{tmp_path}/explicit.sqlite"
    monkeypatch.setenv("MAPLE_COST_DB", f"sqlite:///{tmp_path}/env.sqlite")
    assert CostLedger(database_url=explicit).resolved_url() == explicit
    assert cost_ledger(str(tmp_path)).resolved_url() == f"sqlite:///{tmp_path}/env.sqlite"
    local = CostLedger(storage_root=str(tmp_path)).resolved_url()
    assert local == f"sqlite:///{tmp_path}/costs.sqlite"


def test_remote_storage_roots_default_to_a_local_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert default_sqlite_path("s3://bucket/prefix") == Path("/home/someone/.maple/costs.sqlite")
    assert default_sqlite_path("file:///data/maple") == Path("/data/maple/costs.sqlite")


def test_unsupported_database_is_refused(tmp_path: Path) -> None:
    with (
        CostLedger(database_url="mysql://u:secret@host/db") as tracker,
        pytest.raises(ValueError, match="only sqlite") as info,
    ):
        tracker.record(entry())
    assert "secret" not in str(info.value)


# -- idempotency and reconciliation -----------------------------------------------------------


def test_recording_the_same_attempt_twice_does_not_double_count(tracker: CostLedger) -> None:
    tracker.record(entry())
    tracker.record(entry())
    tracker.record_many([entry(), entry()])
    assert tracker.job_total("job-a") == 0.5
    assert len(tracker.job_entries("job-a")) == 1
    assert tracker.report()[0]["requests"] == 10


def test_re_recording_an_attempt_replaces_it(tracker: CostLedger) -> None:
    tracker.record(entry(cost=0.5, day=date(2026, 11, 1)))
    tracker.record(entry(cost=0.75, requests=12, day=date(2026, 11, 5)))  # a re-run, days later
    [stored] = tracker.job_entries("job-a")
    assert (stored.cost_usd, stored.requests) == (0.75, 12)
    assert stored.recorded_at.date() == date(2026, 11, 1)  # billed once, on the first day
    tracker.record(entry(attempt=1, cost=0.25))  # a retry is a new record
    assert tracker.job_total("job-a") == 1.0


def test_entries_round_trip(tracker: CostLedger) -> None:
    original = entry()
    tracker.record(original)
    assert tracker.job_entries("job-a") == [original]
    assert tracker.job_entries("nothing") == []
    assert tracker.job_total("nothing") == 0.0


def billed_rows(seed: int, n: int) -> pl.DataFrame:
    ids = pl.Series("row_id", range(n))
    cached = (ids * (7919 + seed)) % 800
    return pl.DataFrame(
        {
            "row_id": ids,
            "input_tokens": cached + (ids * 104_729 + seed) % 3000 + 200,
            "cached_input_tokens": cached,
            "cache_write_tokens": pl.Series([0] * n),
            "output_tokens": (ids * 613 + seed) % 900,
        }
    )


def test_ledger_job_total_equals_the_sum_of_row_costs(tracker: CostLedger) -> None:
    """Three shards, shard 1 retried for a third of its rows: the per-row llm_cost_usd (every
    billed attempt of the row) sums to the ledger's job total to the micro-dollar."""
    price = PriceBook().price("gpt-4o-mini", "openai")
    attempts: list[pl.DataFrame] = []
    for shard in range(3):
        first = billed_rows(shard, 20_000).with_columns(pl.col("row_id") + shard * 20_000)
        retried = first.filter(pl.col("row_id") % 3 == 0) if shard == 1 else first.clear()
        for attempt, rows in enumerate([first, retried]):
            if rows.height == 0:
                continue
            tracker.record(
                AttemptCost.from_rows(
                    rows,
                    price,
                    **dict(job="job-r", team="t", model="gpt-4o-mini", provider="openai"),
                    mode="batch",
                    shard=str(shard),
                    attempt=attempt,
                    batch_id=f"b{shard}{attempt}",
                )
            )
            attempts.append(rows.with_columns(cost_expr(price, batch=True)))
    per_row = pl.concat(attempts).group_by("row_id").agg(pl.col("cost_usd").sum())
    assert per_row.height == 60_000
    assert abs(per_row["cost_usd"].sum() - tracker.job_total("job-r")) < 1e-6
    assert [(e.shard, e.attempt) for e in tracker.job_entries("job-r")] == [
        ("0", 0),
        ("1", 0),
        ("1", 1),
        ("2", 0),
    ]
    [report] = tracker.report(by="job")
    assert report["requests"] == 60_000 + 6667
    realtime = pl.concat(attempts).select(cost_expr(price, batch=False).sum()).item()
    assert abs(report["savings_usd"] - (realtime - report["cost_usd"])) < 1e-6
    assert report["savings_usd"] > 0.4 * realtime  # cached input is not discounted in batch


def test_from_rows_sums_tokens_exactly() -> None:
    rows = billed_rows(0, 1000)
    e = AttemptCost.from_rows(
        rows,
        PRICE,
        job="j",
        team="t",
        model="m",
        provider="openai",
        mode="realtime",
        shard="s",
        attempt=0,
        batch_id=None,
    )
    assert e.requests == 1000
    assert e.input_tokens == rows["input_tokens"].sum()
    assert e.cached_input_tokens == rows["cached_input_tokens"].sum()
    assert e.cost_usd == e.realtime_cost_usd  # real-time: nothing saved


def test_invalid_entries_are_rejected() -> None:
    with pytest.raises(ValueError, match="mode"):
        AttemptCost(**{**entry().__dict__, "mode": "bulk"})
    with pytest.raises(ValueError, match="negative"):
        AttemptCost(**{**entry().__dict__, "requests": -1})


# -- reports -----------------------------------------------------------------------------------


def test_report_by_team(tracker: CostLedger) -> None:
    seed(tracker)
    assert tracker.report(by="team") == [
        {
            "team": "catalog",
            "requests": 20,
            "input_tokens": 2000,
            "cached_input_tokens": 200,
            "output_tokens": 400,
            "reasoning_tokens": 0,
            "estimated_tokens": 0,
            "downgraded_requests": 0,
            "cost_usd": 1.0,
            "savings_usd": 1.0,
            "cache_savings_usd": 0.0,
        },
        {
            "team": "search",
            "requests": 15,
            "input_tokens": 1500,
            "cached_input_tokens": 150,
            "output_tokens": 300,
            "reasoning_tokens": 0,
            "estimated_tokens": 0,
            "downgraded_requests": 0,
            "cost_usd": 2.25,
            "savings_usd": 2.0,
            "cache_savings_usd": 0.0,
        },
    ]


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        ("job", {"job-a": (20, 1.0), "job-b": (10, 2.0), "job-c": (5, 0.25)}),
        ("model", {"claude-haiku-4-5": (10, 2.0), "gpt-4o-mini": (25, 1.25)}),
        ("day", {"2026-11-01": (10, 0.5), "2026-11-02": (25, 2.75)}),
    ],
)
def test_report_groups(
    tracker: CostLedger, by: str, expected: dict[str, tuple[int, float]]
) -> None:
    seed(tracker)
    report = tracker.report(by=by)  # type: ignore[arg-type]
    assert {r[by]: (r["requests"], r["cost_usd"]) for r in report} == expected
    assert [r[by] for r in report] == sorted(expected)


def test_report_since_a_day(tracker: CostLedger) -> None:
    seed(tracker)
    assert [r["requests"] for r in tracker.report(by="day", since=date(2026, 11, 2))] == [25]
    assert tracker.report(since=date(2026, 12, 1)) == []
    with pytest.raises(ValueError, match="by must be"):
        tracker.report(by="week")  # type: ignore[arg-type]


# -- schema migrations -------------------------------------------------------------------------


def test_schema_is_versioned_and_migrated_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ledger.sqlite"
    for _ in range(2):
        with CostLedger(database_url=url) as tracker:
            tracker.record(entry())
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            conn.exec_driver_sql("UPDATE maple_ledger_version SET version_num = '9999'")
            conn.commit()
    finally:
        engine.dispose()
    with (
        CostLedger(database_url=url) as tracker,
        pytest.raises(StorageError, match="newer than this Maple"),
    ):
        tracker.report()


def test_the_tables_in_code_are_what_the_revisions_build(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = sa.create_engine(f"sqlite:///{tmp_path}/fresh.sqlite")
    try:
        with engine.begin() as conn:
            migrate(conn)
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
            ours = [d for d in diff if not (d[0] == "remove_table" and d[1].name == VERSION_TABLE)]
            assert ours == []
    finally:
        engine.dispose()


def test_a_ledger_beside_another_alembic_user_keeps_its_own_revision(tmp_path: Path) -> None:
    """Dagster's storage on the same database keeps its revision in ``alembic_version``: the
    ledger neither reads it nor writes it."""
    url = f"sqlite:///{tmp_path}/shared.sqlite"
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
            conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('29b539ebc72a')")
    finally:
        engine.dispose()
    with CostLedger(database_url=url) as tracker:
        tracker.record(entry())
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            other = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
            assert other == "29b539ebc72a"
    finally:
        engine.dispose()


def test_a_ledger_from_before_the_revisions_is_stamped_and_carried_on(tmp_path: Path) -> None:
    """A ledger written by the hand-rolled migrations (``schema_version`` = 2: costs and
    admissions) is stamped revision 0002 and gets the queue table, its rows kept."""
    url = f"sqlite:///{tmp_path}/old.sqlite"
    with CostLedger(database_url=url) as tracker:
        tracker.record(entry())
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE maple_ledger_version")
            conn.exec_driver_sql("DROP TABLE queue_slots")
            conn.exec_driver_sql("DROP TABLE batch_history")
            conn.exec_driver_sql("DROP TABLE rate_holders")
            conn.exec_driver_sql("ALTER TABLE attempt_costs DROP COLUMN uncached_cost_usd")
            conn.exec_driver_sql("ALTER TABLE attempt_costs DROP COLUMN reasoning_tokens")
            conn.exec_driver_sql("ALTER TABLE attempt_costs DROP COLUMN estimated_tokens")
            conn.exec_driver_sql("ALTER TABLE attempt_costs DROP COLUMN downgraded_requests")
            conn.exec_driver_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            conn.exec_driver_sql("INSERT INTO schema_version VALUES (2)")
    finally:
        engine.dispose()
    with CostLedger(database_url=url) as tracker:
        assert [r["requests"] for r in tracker.report(by="job")] == [entry().requests]
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            assert sa.inspect(conn).has_table("queue_slots")
            assert sa.inspect(conn).has_table("batch_history")
            assert sa.inspect(conn).has_table("rate_holders")
    finally:
        engine.dispose()


# -- CLI -------------------------------------------------------------------------------------


@pytest.fixture
def seeded_root(tmp_path: Path) -> str:
    root = str(tmp_path / "store")
    with CostLedger(storage_root=root) as tracker:
        seed(tracker)
    return root


def test_cli_json_is_the_report(seeded_root: str) -> None:
    result = CliRunner().invoke(
        costs_command, ["--storage", seeded_root, "--by", "model", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    with CostLedger(storage_root=seeded_root) as tracker:
        assert json.loads(result.output) == tracker.report(by="model")


def test_cli_csv(seeded_root: str) -> None:
    result = CliRunner().invoke(
        costs_command, ["--storage", seeded_root, "--format", "csv", "--since", "2026-11-02"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [r["team"] for r in rows] == ["catalog", "search"]
    assert rows[0]["requests"] == "10"
    assert float(rows[1]["cost_usd"]) == 2.25


def test_cli_table_is_aligned_with_a_total(seeded_root: str) -> None:
    result = CliRunner().invoke(costs_command, ["--storage", seeded_root, "--by", "job"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "job",
        "requests",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cost_usd",
        "savings_usd",
        "cache_savings_usd",
    ]
    total = ["TOTAL", "35", "3,500", "350", "700", "0", "3.250000", "3.000000", "0.000000"]
    assert lines[-1].split() == total
    assert len({len(line) for line in lines[1:]}) == 1  # every column right-aligned to one width
    assert [line.split()[0] for line in lines[2:5]] == ["job-a", "job-b", "job-c"]


def test_cli_reads_env_and_validates_options(
    seeded_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAPLE_STORAGE", seeded_root)
    result = CliRunner().invoke(costs_command, ["--format", "json"])
    assert [r["team"] for r in json.loads(result.output)] == ["catalog", "search"]
    monkeypatch.setenv("MAPLE_COST_DB", f"sqlite:///{seeded_root}/costs.sqlite")
    result = CliRunner().invoke(costs_command, ["--storage", "/nonexistent", "--format", "json"])
    assert len(json.loads(result.output)) == 2
    assert CliRunner().invoke(costs_command, ["--by", "week"]).exit_code == 2
    assert CliRunner().invoke(costs_command, ["--since", "yesterday"]).exit_code == 2


def test_cli_with_an_empty_ledger(tmp_path: Path) -> None:
    result = CliRunner().invoke(costs_command, ["--storage", str(tmp_path / "none")])
    assert result.exit_code == 0
    assert result.output.strip() == "No costs recorded."
    result = CliRunner().invoke(costs_command, ["--storage", str(tmp_path), "--format", "json"])
    assert json.loads(result.output) == []


def test_cli_runs_as_a_real_process(seeded_root: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MAPLE_STORAGE": seeded_root}
    env.pop("MAPLE_COST_DB", None)
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "maple_assets.cli.costs", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert [r["cost_usd"] for r in json.loads(done.stdout)] == [1.0, 2.25]
