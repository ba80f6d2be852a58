"""The Dagster home the CLI opens keeps its SQLite engines open: same files, same events.

Runs go through real ``dg.materialize`` runs on the instance ``instance_for`` opens, and are
read back through a plain ``DagsterInstance.from_config`` (Dagster's own SQLite classes), as the
Dagster UI reads the same home."""

import os
from typing import Any

import dagster as dg
import pytest

from maple_assets.api import dagster_home
from maple_assets.api.pooled_sqlite import (
    OPEN_RUNS,
    PooledSqliteEventLogStorage,
    PooledSqliteRunStorage,
)

SHARDS = dg.StaticPartitionsDefinition([f"s{i:05d}" for i in range(6)])


@dg.asset(partitions_def=SHARDS)
def shard_rows(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"rows": len(context.partition_keys)})


def range_run(instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [shard_rows],
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": "s00000",
            "dagster/asset_partition_range_end": "s00005",
        },
    )


@pytest.fixture
def home(tmp_path, monkeypatch) -> str:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return dagster_home.dagster_home(str(tmp_path / "store"))


def test_runs_on_the_pooled_instance_read_back_through_dagsters_own_storage(home):
    instance = dagster_home.instance_for(os.path.dirname(home))
    assert isinstance(instance.run_storage, PooledSqliteRunStorage)
    assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
    runs = [range_run(instance).run_id for _ in range(OPEN_RUNS + 2)]
    # engines stay bounded: the index and the most recent runs' logs
    assert len(instance.event_log_storage._engines) <= OPEN_RUNS + 1

    plain = dg.DagsterInstance.from_config(home)  # Dagster's defaults on the same files
    assert type(plain.event_log_storage).__name__ == "SqliteEventLogStorage"
    assert [r.run_id for r in plain.get_runs()] == runs[::-1]
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in plain.get_runs())
    events = plain.fetch_materializations(shard_rows.key, limit=100).records
    assert len(events) == 6 * len(runs)
    status = plain.get_materialized_partitions(shard_rows.key)
    assert status == set(SHARDS.get_partition_keys())
    # an older run's log (its engine closed by now) still reads and writes through the pool
    first = instance.all_logs(runs[0])
    assert sum(1 for e in first if e.dagster_event_type == "ASSET_MATERIALIZATION") == 6


def test_a_home_that_configures_its_storage_is_opened_as_configured(home, tmp_path):
    os.makedirs(home)
    own = tmp_path / "own"
    with open(os.path.join(home, "dagster.yaml"), "w", encoding="utf-8") as handle:
        handle.write(f"storage:\n  sqlite:\n    base_dir: {own}\ntelemetry:\n  enabled: false\n")
    assert dagster_home.pooled_storages(home) == {}
    instance = dagster_home.instance_for(os.path.dirname(home))
    assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
    assert range_run(instance).success
    assert (own / "history" / "runs.db").exists()


def test_wipe_closes_the_engines_before_deleting_the_run_files(home):
    instance = dagster_home.instance_for(os.path.dirname(home))
    run_id = range_run(instance).run_id
    assert instance.event_log_storage._engines
    instance.wipe()
    assert set(instance.event_log_storage._engines) <= {"index"}  # the index is kept, emptied
    assert not os.path.exists(os.path.join(home, "history", "runs", f"{run_id}.db"))
    assert range_run(instance).success  # a new run after the wipe writes a fresh log
    assert len(instance.get_runs()) == 1


def test_a_new_run_database_is_the_one_dagster_would_make(tmp_path):
    """Same tables, indexes, journal mode and alembic revision as Dagster's own set-up."""
    from resources.dagster_private import SqliteEventLogStorage

    def made_by(storage: Any) -> tuple[Any, ...]:
        with storage.run_connection("some-run") as conn:
            schema = sorted(conn.exec_driver_sql("select type, name, sql from sqlite_master"))
            revision = conn.exec_driver_sql("select version_num from alembic_version").all()
            journal = conn.exec_driver_sql("PRAGMA journal_mode").all()
        return schema, revision, journal

    ours = made_by(PooledSqliteEventLogStorage(str(tmp_path / "ours")))
    theirs = made_by(SqliteEventLogStorage(str(tmp_path / "theirs")))
    assert ours == theirs
    assert ours[2] == [("wal",)]
