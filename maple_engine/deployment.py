"""Runs that do not share a machine share state only through the storage root and the ledger.

Under a Dagster deployment whose run launcher starts each run on its own machine, pod or task
(K8s, ECS, Docker, Celery), a local storage root or a SQLite ledger would be a different folder or
file in every run: shard files, submission records and costs would be lost between runs and the
same batch created again. So the resources refuse them at run start.

Runs share a machine when the instance's run launcher is Dagster's default one (each run a
subprocess of the code server) or when there is no instance (``maple enrich``, tests), unless a
step runs on another host than the one that launched its run (Dagster's celery executor: each
step a task on some worker host; the launcher names its host in a run tag). Set
``MAPLE_RUNS_SHARE_MACHINE=0`` to declare that they do not (say, code servers on several hosts
behind the default launcher) or ``=1`` to override the detection.
"""

import socket
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.settings import knob

SHARE_ENV = "MAPLE_RUNS_SHARE_MACHINE"
LOCAL_LAUNCHERS = frozenset({"DefaultRunLauncher", "LocalRunLauncher", "SyncInMemoryRunLauncher"})


def launcher_name(instance: Any) -> str | None:
    """The class name of the instance's run launcher, without instantiating it."""
    if instance is None:
        return None
    try:
        data = instance.get_ref().run_launcher_data
    except Exception:  # noqa: BLE001 - an ephemeral instance has no ref: its runs are local
        return None
    return str(data.class_name) if data is not None else None


def runs_share_machine(instance: Any, launched_on: str | None = None) -> bool:
    """Whether every run (and step) shares this machine; ``launched_on`` is the host that
    launched the run being set up, where its launcher says."""
    setting = (knob(SHARE_ENV) or "").strip().lower()
    if setting:
        return setting in {"1", "true", "yes"}
    if launched_on is not None and launched_on != socket.gethostname():
        return False
    name = launcher_name(instance)
    return name is None or name in LOCAL_LAUNCHERS


def require_shared(
    instance: Any, what: str, value: str, fix: str, launched_on: str | None = None
) -> None:
    """Refuse a machine-local ``what`` (storage root, ledger) when runs do not share a machine."""
    if runs_share_machine(instance, launched_on):
        return
    if launched_on is not None and launched_on != socket.gethostname():
        where = f"this step runs on {socket.gethostname()}, its run was launched on {launched_on}"
    else:
        where = f"each run on its own machine ({launcher_name(instance) or f'{SHARE_ENV}=0'})"
    raise ConfigError(
        f"The {what} is {value}, which is local to one machine, but this deployment runs {where}: "
        f"state would be lost between runs and batches created twice. {fix} (or set "
        f"{SHARE_ENV}=1 if every run really shares this machine)."
    )
