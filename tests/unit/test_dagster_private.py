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
    "RUN_KEY_TAG": TAGS,
    "WILL_RETRY_TAG": TAGS,
    "EPHEMERAL_JOB_NAME": "dagster._core.definitions.materialize",
    "InstanceRef": "dagster._core.instance.ref",
    "CheckRunHealthResult": "dagster._core.launcher",
    "WorkerStatus": "dagster._core.launcher",
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


def test_only_the_one_module_imports_dagster_private_modules() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ONE_MODULE:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names if "dagster._" in n]
    assert found == []
