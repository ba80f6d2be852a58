"""``maple dev``: ``dagster dev`` on the project's workspace, stoppable from a script.

``dagster dev`` maps SIGTERM to whatever SIGINT does in its process (for Kubernetes), and a
command started in the background by a non-interactive shell (``dagster dev ... &`` in a
script) begins with SIGINT ignored: then neither signal stops it, nor its webserver, daemon and
code servers. ``maple dev`` gives both signals their default action before it becomes
``dagster dev`` (the same process, by ``exec``), so Ctrl-C, ``kill`` and ``kill -INT`` stop it
and every process it started, in the foreground and in the background alike.
"""

import os
import shutil
import signal
import sys

import click


@click.command(
    "dev",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("dagster_args", nargs=-1, type=click.UNPROCESSED)
def dev_command(dagster_args: tuple[str, ...]) -> None:
    """Run `dagster dev -w workspace.yaml` (any other `dagster dev` options are passed on):
    the Dagster UI and daemon on the project's code location, stopped by SIGINT or SIGTERM
    even when started in the background from a script."""
    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    args = list(dagster_args)
    if not {"-w", "--workspace"} & set(args):
        args = ["-w", "workspace.yaml", *args]
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # kept across exec, unlike a handler
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(dagster, [dagster, "dev", *args])
