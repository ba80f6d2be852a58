"""The cost ledger on a real PostgreSQL server.

Uses `MAPLE_TEST_POSTGRES_URL` (a `postgresql+psycopg2://` URL, e.g. from CI) when set; otherwise
starts a throwaway server from the distribution's binaries (`/usr/lib/postgresql/*/bin`, package
`postgresql`) in a temporary directory, as the `postgres` user when running as root. Skips only
when neither is available. Each test gets a fresh database.
"""

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from glob import glob
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from maple_assets.cli.costs import costs_command
from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import cost_expr
from maple_engine.ledger.schema import head_revision
from resources.costs import CostTracker

pytestmark = pytest.mark.postgres
PG_ENV = "MAPLE_TEST_POSTGRES_URL"


def _pg_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin directory."""
    found = glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: int(Path(p).parts[-3].split(".")[0]))
        return Path(newest).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Server:
    """A PostgreSQL cluster in a temporary directory, trust auth, on 127.0.0.1."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="maple-pg-"))
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root and there is no 'postgres' user to run the server")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.port = _free_port()

    def _run(self, *args: str) -> None:
        cmd = [*self.as_user, str(self.bindir / args[0]), *args[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            log = self.dir / "log"
            extra = log.read_text() if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}{extra}")

    def start(self) -> str:
        data = str(self.dir / "data")
        self._run("initdb", "-D", data, "-A", "trust", "-U", "maple", "-E", "UTF8", "--no-sync")
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        self._run("pg_ctl", "-D", data, "-l", str(self.dir / "log"), "-o", options, "-w", "start")
        return f"postgresql+psycopg2://maple@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """``$MAPLE_TEST_POSTGRES_URL``, else a throwaway server's URL (skips without either)."""
    if url := os.environ.get(PG_ENV):
        yield url
        return
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip(
            f"no PostgreSQL: set {PG_ENV} or install the server binaries "
            "(apt-get install postgresql) so the test can start a throwaway one"
        )
    server = _Server(bindir)
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@contextlib.contextmanager
def fresh_database(server_url: str, prefix: str = "maple_costs") -> Iterator[str]:
    """A new database on the server, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_url(server_url: str) -> Iterator[str]:
    """A fresh database on the server, dropped afterwards."""
    with fresh_database(server_url) as url:
        yield url


def entry(
    job: str, shard: str, *, team: str = "catalog", day: int = 2, cost: float = 0.5
) -> AttemptCost:
    return AttemptCost(
        job=job,
        team=team,
        model="gpt-4o-mini" if team == "catalog" else "claude-haiku-4-5",
        provider="openai",
        mode="batch",
        shard=shard,
        attempt=0,
        batch_id=f"batch_{job}_{shard}",
        requests=10,
        input_tokens=1000,
        cached_input_tokens=100,
        cache_write_tokens=5,
        output_tokens=200,
        cost_usd=cost,
        realtime_cost_usd=2 * cost,
        recorded_at=datetime(2026, 11, day, 23, 59, 59, 999_999, tzinfo=UTC),
    )


def test_record_is_idempotent_and_round_trips(pg_url: str) -> None:
    with CostTracker(database_url=pg_url) as tracker:
        first = entry("job-a", "0")
        tracker.record(first)
        tracker.record(first)
        tracker.record_many([first, entry("job-a", "1", cost=0.25)])
        assert tracker.job_total("job-a") == 0.75
        assert tracker.job_entries("job-a")[0] == first


def test_reports_by_every_key_and_since(pg_url: str) -> None:
    with CostTracker(database_url=pg_url) as tracker:
        tracker.record_many(
            [
                entry("job-a", "0", day=1),
                entry("job-a", "1", day=2),
                entry("job-b", "0", team="search", day=2, cost=2.0),
            ]
        )
        by_team = tracker.report(by="team")
        assert by_team[0] == {
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
        }
        assert all(isinstance(by_team[0][k], int) for k in ("requests", "input_tokens"))
        assert [(r["job"], r["cost_usd"]) for r in tracker.report(by="job")] == [
            ("job-a", 1.0),
            ("job-b", 2.0),
        ]
        assert [r["model"] for r in tracker.report(by="model")] == [
            "claude-haiku-4-5",
            "gpt-4o-mini",
        ]
        assert [(r["day"], r["requests"]) for r in tracker.report(by="day")] == [
            ("2026-11-01", 10),
            ("2026-11-02", 20),
        ]
        since = tracker.report(by="team", since=date(2026, 11, 2))
        assert [(r["team"], r["requests"]) for r in since] == [("catalog", 10), ("search", 10)]


def test_ledger_reconciles_with_rows(pg_url: str) -> None:
    price = PriceBook().price("claude-haiku-4-5", "anthropic")
    ids = pl.Series(range(30_000))
    rows = pl.DataFrame(
        {
            "input_tokens": ids % 5000 + 1500,
            "cached_input_tokens": ids % 700,
            "cache_write_tokens": ids % 300,
            "output_tokens": ids * 31 % 1000,
        }
    )
    with CostTracker(database_url=pg_url) as tracker:
        for shard, part in enumerate(rows.iter_slices(10_000)):
            tracker.record(
                AttemptCost.from_rows(
                    part,
                    price,
                    **dict(job="j", team="t", model="claude-haiku-4-5", provider="anthropic"),
                    mode="batch",
                    shard=str(shard),
                    attempt=0,
                    batch_id=None,
                )
            )
        per_row = rows.select(cost_expr(price, batch=True)).to_series().sum()
        assert abs(tracker.job_total("j") - per_row) < 1e-6


def test_concurrent_first_use_migrates_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            with CostTracker(database_url=pg_url) as tracker:
                for shard in range(20):
                    tracker.record(entry(f"job-{worker}", str(shard), cost=0.125))
        except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            versions = conn.exec_driver_sql("SELECT version_num FROM maple_ledger_version").all()
    finally:
        engine.dispose()
    assert [v[0] for v in versions] == [head_revision()]
    with CostTracker(database_url=pg_url) as tracker:
        assert sum(r["requests"] for r in tracker.report(by="job")) == 4 * 20 * 10
        assert tracker.job_total("job-3") == 20 * 0.125


def test_cli_against_postgres(pg_url: str, tmp_path: Path) -> None:
    with CostTracker(database_url=pg_url) as tracker:
        tracker.record(entry("job-a", "0"))
    result = CliRunner().invoke(
        costs_command, ["--db", pg_url, "--storage", str(tmp_path), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["team"] == "catalog"
    assert not (tmp_path / "costs.sqlite").exists()


def test_concurrent_budget_admissions_never_pass_the_budget(pg_url: str) -> None:
    """Processes admitting batches of one job at once: the advisory lock serialises them."""
    from tests.integration.test_budget_admission import BUDGET, ESTIMATE, admitted, run_admitters

    run_admitters(pg_url)
    estimates = admitted(pg_url)
    assert len(estimates) == int(BUDGET // ESTIMATE)
    assert sum(estimates) <= BUDGET
