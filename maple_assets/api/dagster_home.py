"""The Dagster instance ``maple enrich`` runs against, quiet on a fresh machine.

``DAGSTER_HOME`` when set (created if missing), else ``<storage root>/dagster`` (or
``~/.maple/dagster`` for an S3 storage root). A home without a ``dagster.yaml`` gets one that
turns telemetry off, so a first run prints neither Dagster's telemetry banner nor its
"No dagster.yaml found" warning, and keeps no compute logs: capturing a step's stdout forks a
``tail`` from the (large) CLI process for every step, which cost a 1M-row job whose queue limit
is learned 4.8 s of CPU in 24 runs, and the CLI's runs print nothing there.

A home whose ``dagster.yaml`` leaves its storage to Dagster's SQLite defaults is opened here
with those storages' engines kept open (``pooled_sqlite``): same files, a third of the CPU per
run. A home that configures its storage (PostgreSQL, say) is opened as configured.
"""

import fcntl
import os

import dagster as dg
import yaml

from maple_engine.errors import ConfigError
from maple_engine.storage.storage import is_remote
from resources.dagster_private import InstanceRef

STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")
POOLED = "maple_assets.api.pooled_sqlite"

DAGSTER_YAML = """telemetry:
  enabled: false
compute_logs:  # the CLI's runs print nothing worth keeping; capturing forks a tail per step
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""


def dagster_home(storage_root: str) -> str:
    if os.environ.get("DAGSTER_HOME"):
        return os.path.abspath(os.path.expanduser(os.environ["DAGSTER_HOME"]))
    if is_remote(storage_root):
        return os.path.join(os.path.expanduser("~"), ".maple", "dagster")
    return os.path.join(os.path.abspath(storage_root), "dagster")


def prepare_home(home: str) -> None:
    """Create the folder and a ``dagster.yaml`` (telemetry off) unless one exists."""
    try:
        os.makedirs(home, exist_ok=True)
        config = os.path.join(home, "dagster.yaml")
        if not os.path.exists(config):
            with open(config, "x", encoding="utf-8") as handle:
                handle.write(DAGSTER_YAML)
    except FileExistsError:
        pass  # another process wrote it first
    except OSError as exc:
        raise ConfigError(
            f"Cannot prepare the Dagster home {home!r} ({exc.strerror}): set DAGSTER_HOME to a "
            "writable folder."
        ) from exc


def instance_for(storage_root: str) -> dg.DagsterInstance:
    """The instance at the home; opened under a file lock, because the first open of a
    SQLite-backed home creates its tables and two processes doing that at once fail ("table
    runs already exists")."""
    home = dagster_home(storage_root)
    prepare_home(home)
    with open(os.path.join(home, ".open.lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            ref = InstanceRef.from_dir(home, overrides=pooled_storages(home))
            return dg.DagsterInstance.from_ref(ref)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pooled_storages(home: str) -> dict[str, object]:
    """Dagster's SQLite run and event-log storages under ``home`` with their engines kept open,
    unless the home's ``dagster.yaml`` configures its storage itself."""
    try:
        with open(os.path.join(home, "dagster.yaml"), encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        config = {}
    if not isinstance(config, dict) or any(key in config for key in STORAGE_KEYS):
        return {}
    history = os.path.join(home, "history")
    return {
        "run_storage": {
            "module": POOLED,
            "class": "PooledSqliteRunStorage",
            "config": {"base_dir": history},
        },
        "event_log_storage": {
            "module": POOLED,
            "class": "PooledSqliteEventLogStorage",
            "config": {"base_dir": os.path.join(history, "runs")},
        },
    }
