"""The real-time rate share kept in the deployment's database (``rate_holders``), on PostgreSQL
and SQLite: live senders count each other, one that leaves is gone at once, one SIGKILLed
without cleanup stops counting after the window, and operators see who holds a share."""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.errors import StorageError
from maple_engine.ledger import rate_holders
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.rate_holders import WINDOW_S, holders
from maple_engine.send.lane import RealtimeLane
from maple_engine.send.rate_shares import DatabaseShare, Share, rate_share
from tests.conftest import env_provider
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.integration.test_realtime import catalog, enrich, run, server, shard

__all__ = ["pg_url", "server", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
SECRET = "s3cr3t-pw"


@pytest.fixture(params=["postgresql", "sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    else:
        yield request.getfixturevalue("pg_url")


def password_url(pg_url: str) -> str:
    """``pg_url``'s user given the password ``SECRET`` (the server trusts local users: the
    password is only there to be hidden), and the URL with it."""
    url = sa.make_url(pg_url)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"ALTER USER {url.username} PASSWORD '{SECRET}'")
    admin.dispose()
    return url.set(password=SECRET).render_as_string(hide_password=False)


def share(url: str, root: Path, model: str = "gpt-4o-mini") -> Share:
    return rate_share(url, str(root), "openai-realtime", "acct", model)


def test_senders_of_one_scope_count_each_other_and_one_that_leaves_is_gone(
    db_url: str, tmp_path: Path
) -> None:
    first, second, other = (
        share(db_url, tmp_path),
        share(db_url, tmp_path),
        share(db_url, tmp_path, "gpt-4o"),
    )
    try:
        assert isinstance(first, DatabaseShare)
        assert first.beat() == (1, 0)
        two, rank = second.beat()
        assert two == 2
        assert other.beat() == (1, 0)  # another model: another limit
        assert first.beat() == (2, 1 - rank)  # ranked by name: one each
        second.leave()
        assert first.beat() == (1, 0)  # at its next beat, not a window later
        with CostLedger(database_url=db_url) as ledger, ledger.transaction() as conn:
            held = holders(conn)
        assert {(h.scope, h.sender) for h in held} == {
            ("openai-realtime/acct/gpt-4o-mini", first.sender),
            ("openai-realtime/acct/gpt-4o", other.sender),
        }
        assert all(h.live and h.silent_s < 1 for h in held)
        assert not list(tmp_path.rglob("*.json"))  # no heartbeat objects under the root
    finally:
        first.leave()
        other.leave()


BEATER = """
import sys, time
from maple_engine.send.rate_shares import rate_share
me = rate_share(sys.argv[1], sys.argv[2], "openai-realtime", "acct", "gpt-4o-mini")
while True:
    me.beat()
    print("beat", flush=True)
    time.sleep(me.beat_s)
"""


def test_a_sender_killed_without_cleanup_stops_counting_within_the_window(
    db_url: str, tmp_path: Path
) -> None:
    survivor = share(db_url, tmp_path)
    victim = subprocess.Popen(
        [sys.executable, "-c", BEATER, db_url, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert victim.stdout is not None and victim.stdout.readline() == "beat\n"
        assert survivor.beat()[0] == 2
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        killed = time.monotonic()
        while survivor.beat()[0] == 2:
            assert time.monotonic() - killed < WINDOW_S + 5, "the dead sender still counts"
            time.sleep(0.1)
        back = time.monotonic() - killed
        assert back <= WINDOW_S + 1.5, back  # its last beat was at most a beat before the kill
        assert survivor.beat() == (1, 0)
    finally:
        victim.kill()
        victim.wait(timeout=10)
        if victim.stdout is not None:
            victim.stdout.close()
        survivor.leave()


def test_maple_status_lists_who_holds_shares_and_never_the_password(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_password = password_url(pg_url)
    monkeypatch.setenv("MAPLE_COST_DB", with_password)
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "root"))
    holder = share(with_password, tmp_path)
    try:
        holder.beat()
        result = CliRunner().invoke(main, ["status"])
    finally:
        holder.leave()
    assert result.exit_code == 0, result.output
    assert "openai-realtime/acct/gpt-4o-mini" in result.output
    assert holder.sender in result.output
    assert SECRET not in result.output


def test_maple_enrich_holds_a_share_in_the_ledger_database_and_leaves_it(
    server: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's real-time run takes its share through ``MAPLE_COST_DB`` (the provider
    resource reads it from the environment), beats while it sends, and deletes its row."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.setenv("MAPLE_COST_DB", ledger)
    beats: list[int] = []
    real_beat = rate_holders.beat

    def counting(*args: Any) -> set[str]:
        live = real_beat(*args)
        beats.append(len(live))
        return live

    monkeypatch.setattr(rate_holders, "beat", counting)
    source = catalog(tmp_path / "in.parquet", 40)
    out = enrich(source, tmp_path / "out.parquet", tmp_path / "root", "openai-realtime")
    assert out["llm_status"].to_list() == ["succeeded"] * 40
    assert beats and set(beats) == {1}
    with CostLedger(database_url=ledger) as costs, costs.transaction() as conn:
        assert holders(conn) == []  # left on a clean exit
    assert not list((tmp_path / "root").rglob("_ratelimits/**/*.json"))


def test_a_beat_that_fails_mid_run_keeps_the_last_count_and_the_run_goes_on(
    server: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    beats = []
    real_beat = rate_holders.beat

    def flaky(*args: Any) -> set[str]:
        beats.append(args)
        if len(beats) > 1:
            raise StorageError("Cost ledger sqlite:///... failed: database is locked")
        return real_beat(*args)

    monkeypatch.setattr(rate_holders, "beat", flaky)
    provider = env_provider(  # 60 rows at 1,200 RPM: 3 s, 3 beats
        "openai-realtime", checkpoint_root=str(tmp_path), rate_share_db=ledger, rpm=1200
    )
    rows = run(provider, 60)
    assert rows.height == 60 and len(beats) >= 3


def test_a_first_beat_that_fails_stops_the_attempt_before_anything_is_sent(
    server: EmulatorServer, tmp_path: Path
) -> None:
    unreachable = "postgresql+psycopg2://maple:pw@127.0.0.1:9/nowhere"
    provider = env_provider("openai-realtime", checkpoint_root=str(tmp_path),
                            rate_share_db=unreachable)  # fmt: skip
    with pytest.raises((StorageError, sa.exc.OperationalError)) as raised:
        RealtimeLane(provider).submit(shard(provider, 5))
    assert ":pw@" not in str(raised.value)
    assert server.stats()["realtime_requests"] == 0


def test_a_new_sender_is_counted_once_every_live_one_has_beaten_since_it_came(
    db_url: str, tmp_path: Path
) -> None:
    first, second = share(db_url, tmp_path), share(db_url, tmp_path)
    try:
        first.beat()
        assert first.counted()  # alone: nobody to wait for
        second.beat()
        assert not second.counted()  # the first has not seen it yet
        time.sleep(0.01)  # a clock tick later (SQLite's clock has milliseconds)
        first.beat()
        assert second.counted()
    finally:
        first.leave()
        second.leave()


def test_the_ledger_password_reaches_no_run_snapshot_nor_file(
    server: EmulatorServer, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maple enrich`` with ``MAPLE_COST_DB`` holding a password: the ledger and rate-share
    resources take it as ``dg.EnvVar``, so no run's job snapshot, run config or file holds it."""
    import dagster as dg
    from dagster import serialize_value

    monkeypatch.setenv("MAPLE_COST_DB", password_url(pg_url))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    source = catalog(tmp_path / "in.parquet", 20)
    for provider in ("openai-realtime", "emulator"):
        out = tmp_path / f"{provider}.parquet"
        enrich(source, out, tmp_path / "root", provider)
    instance = dg.DagsterInstance.from_config(str(tmp_path / "root" / "dagster"))
    runs = instance.get_runs()
    assert len(runs) >= 6  # each job: input_shards, submissions, raw_responses with merged
    for record in runs:
        snapshot = instance.get_job_snapshot(record.job_snapshot_id)
        assert SECRET not in serialize_value(snapshot) + serialize_value(record), record.run_id
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
