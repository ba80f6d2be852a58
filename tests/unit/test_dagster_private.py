"""Dagster's private modules are imported in one place, ``resources/dagster_private.py``: this
test lists every name taken from them, so that an upgrade that moves one fails here, named,
rather than in a run; and no other module of the packages imports ``dagster._``."""

import ast
import importlib
from pathlib import Path

from resources import dagster_private

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("maple_engine", "maple_assets", "resources", "partitions", "emulator")
ONE_MODULE = ROOT / "resources" / "dagster_private.py"

# Each private name and the module Dagster keeps it in (the one module says who needs it, why).
TAGS = "dagster._core.storage.tags"
SQLITE_EVENTS = "dagster._core.storage.event_log.sqlite.sqlite_event_log"
PRIVATE = {
    "ASSET_PARTITION_RANGE_END_TAG": TAGS,
    "ASSET_PARTITION_RANGE_START_TAG": TAGS,
    "AUTO_RETRY_RUN_ID_TAG": TAGS,
    "BACKFILL_ID_TAG": TAGS,
    "BulkActionStatus": "dagster._core.execution.backfill",
    "PARTITION_NAME_TAG": TAGS,
    "RETRY_ON_ASSET_OR_OP_FAILURE_TAG": TAGS,
    "RUN_KEY_TAG": TAGS,
    "WILL_RETRY_TAG": TAGS,
    "EPHEMERAL_JOB_NAME": "dagster._core.definitions.materialize",
    "AssetCheckEvaluationTargetMaterializationData": (
        "dagster._core.definitions.asset_checks.asset_check_evaluation"
    ),
    "InstanceRef": "dagster._core.instance.ref",
    "CheckRunHealthResult": "dagster._core.launcher",
    "WorkerStatus": "dagster._core.launcher",
    "LaunchRunContext": "dagster._core.launcher",
    "SqlEventLogStorageMetadata": "dagster._core.storage.event_log.schema",
    "sqlite_event_log": "dagster._core.storage.event_log.sqlite",
    "INDEX_SHARD_NAME": SQLITE_EVENTS,
    "SqliteEventLogStorage": SQLITE_EVENTS,
    "SqliteRunStorage": "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "get_alembic_config": "dagster._core.storage.sql",
    "SQLITE_BUSY_TIMEOUT_SECONDS": "dagster._core.storage.sqlite",
}


def test_every_private_name_is_listed_and_still_where_dagster_keeps_it() -> None:
    assert sorted(dagster_private.__all__) == sorted(PRIVATE)
    for name, module in PRIVATE.items():
        assert getattr(importlib.import_module(module), name) is getattr(dagster_private, name)


# Tests that read Dagster's own internals to assert what its UI would show, with no public API
# to ask (staleness as the asset graph computes it, the repository snapshot the UI loads).
TESTS_READING_DAGSTER_INTERNALS = {
    "tests/integration/test_current_partitions.py": "stale status as Dagster resolves it",
    "tests/integration/test_distill_backfill.py": "a backfill as the UI stores it, run",
    "tests/integration/test_living_graph.py": "stale status as Dagster resolves it",
    "tests/integration/test_materialize_all.py": "a backfill as the UI stores it, run",
    "tests/integration/test_observed_inputs.py": "stale status as Dagster resolves it",
    "tests/integration/test_resource_config.py": "the repository snapshot the UI shows",
    "tests/integration/test_will_materialize.py": "a backfill as the UI stores it",
}


def parsed(source: str) -> ast.Module:
    """``ast.parse(source)``, once more after CPython's "AST constructor recursion depth
    mismatch" SystemError (python/cpython#106905, seen here on 3.11.7): a recursion counter
    shared with another thread's parse, not a fault of the source."""
    try:
        return ast.parse(source)
    except SystemError:
        return ast.parse(source)


def private_imports(path: Path) -> list[str]:
    """The ``dagster._`` modules ``path`` imports, at any depth of its code."""
    found = []
    for node in ast.walk(parsed(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("dagster._")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
            found.append(node.module or "")
    return found


def test_only_the_one_module_imports_dagster_private_modules() -> None:
    paths = [p for package in (*PACKAGES, "tests") for p in sorted((ROOT / package).rglob("*.py"))]
    found = {
        str(path.relative_to(ROOT)): private_imports(path)
        for path in paths
        if path != ONE_MODULE and private_imports(path)
    }
    assert set(found) == set(TESTS_READING_DAGSTER_INTERNALS), found
