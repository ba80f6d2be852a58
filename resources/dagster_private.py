"""Every name Maple takes from Dagster's private modules (``dagster._...``), each with the reason
no public API serves: the one place they are imported, so that a Dagster upgrade that moves or
renames one fails ``tests/unit/test_dagster_private.py`` (which imports each), not a run. The
rest of the code imports them from here; a test holds every other module to that."""

# Where a check evaluation points at the materialization it judged: maple_assets.graph.checks
# logs each shard's failed_rows evaluation itself (one run may cover many partitions, which
# dg.AssetCheckResult cannot), and Dagster shows a partition's check state only while the
# evaluation's target is that partition's latest materialization; no public constructor.
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

# The job name ``dg.materialize`` gives the runs it launches (maple_assets.api.runner finds the
# runs of a stage by it); public only as that function's behaviour.
from dagster._core.definitions.materialize import EPHEMERAL_JOB_NAME

# The states of a backfill: maple_assets.graph.shard_partitions keeps a superseded shard
# partition while an unfinished backfill targets it (Dagster fails a backfill whose targeted
# partitions were deleted); the instance's get_backfills takes them, and Dagster exports no
# public enum.
from dagster._core.execution.backfill import BulkActionStatus

# The reference to a Dagster instance (its dagster.yaml's storage settings), which
# maple_assets.api.dagster_home reads to reject a storage the CLI cannot share; dg.DagsterInstance
# exposes no public constructor from a config dict.
from dagster._core.instance.ref import InstanceRef

# What a run launcher's health check returns (resources.run_launcher checks a run's worker
# process), and what its launch_run is given; DefaultRunLauncher is public, these types are not.
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus

# The SQLite event log and run storages maple_assets.api.pooled_sqlite extends with pooled
# connections for the CLI's in-process runs, with the schema, migrations, busy timeout and index
# shard name they use: Dagster has no public storage classes to subclass.
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import get_alembic_config
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS

# Run tags Dagster itself writes and reads: the sensor's run key, the retry of a failed run and
# its "will retry" mark (maple_assets.graph.revive re-launches what Dagster gave up on), and the
# two ends of a partition-range run (maple_assets.api.runner launches single-run backfills),
# and the partition of a one-partition run (tests/e2e/test_crash.py reads it), and the backfill
# a run belongs to (maple_assets.graph.assets: merged waits for the sensor in a backfill).
# Dagster exports no constants for them; the strings are its contract with its own daemon.
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    AUTO_RETRY_RUN_ID_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    RETRY_ON_ASSET_OR_OP_FAILURE_TAG,
    RUN_KEY_TAG,
    WILL_RETRY_TAG,
)

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "AUTO_RETRY_RUN_ID_TAG",
    "BACKFILL_ID_TAG",
    "EPHEMERAL_JOB_NAME",
    "INDEX_SHARD_NAME",
    "PARTITION_NAME_TAG",
    "RETRY_ON_ASSET_OR_OP_FAILURE_TAG",
    "RUN_KEY_TAG",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "WILL_RETRY_TAG",
    "AssetCheckEvaluationTargetMaterializationData",
    "BulkActionStatus",
    "CheckRunHealthResult",
    "InstanceRef",
    "LaunchRunContext",
    "SqlEventLogStorageMetadata",
    "SqliteEventLogStorage",
    "SqliteRunStorage",
    "WorkerStatus",
    "get_alembic_config",
    "sqlite_event_log",
]
