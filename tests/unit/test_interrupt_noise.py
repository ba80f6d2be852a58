"""A Ctrl-C that Dagster's handler raises inside a garbage-collection callback is not printed as
"Exception ignored in ..." while the driver watches for SIGINT; other such errors still are. A
Ctrl-C is never lost: raised where it cannot propagate, or swallowed by a library, it still
stops the command with exit code 130."""

import subprocess
import sys
import time
import weakref
from typing import Any

import pytest
from dagster import DagsterExecutionInterruptedError

from maple_assets.api.errors import INTERRUPTED_MESSAGE, is_interrupt
from maple_assets.api.interrupts import interrupts_seen


class _Thing:
    pass


def _raise(error: BaseException) -> Any:
    def callback(_ref: Any) -> None:
        raise error

    return callback


def test_interrupts_in_callbacks_are_dropped_and_other_errors_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(type(u.exc_value)))
    errors = [DagsterExecutionInterruptedError(), KeyboardInterrupt(), ValueError("kept")]
    with interrupts_seen():
        for error in errors:
            thing = _Thing()
            ref = weakref.ref(thing, _raise(error))
            del thing  # the callback runs now, raising where Python cannot propagate
            assert ref() is None
    assert reported == [ValueError]
    thing = _Thing()
    ref = weakref.ref(thing, _raise(DagsterExecutionInterruptedError()))
    del thing
    assert reported == [ValueError, DagsterExecutionInterruptedError]  # the hook is restored


def test_an_interrupt_is_told_without_importing_dagster_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C may land while Dagster is being imported, and importing it again from the
    half-loaded package fails: telling an interrupt imports nothing. Dagster's own interrupt,
    once Dagster is loaded, is one too."""
    assert is_interrupt(DagsterExecutionInterruptedError())
    monkeypatch.setitem(sys.modules, "dagster._core.errors", None)  # an import of it fails
    assert is_interrupt(KeyboardInterrupt())
    assert not is_interrupt(ValueError("kept"))


QUIET_COMMAND = """
import logging, signal
from dagster import DagsterExecutionInterruptedError
from maple_assets.cli.errors import quiet_interrupts

signal.signal(signal.SIGINT, signal.default_int_handler)
pool = logging.getLogger("sqlalchemy.pool.impl.QueuePool")
with quiet_interrupts(debug=False):
    for error in (DagsterExecutionInterruptedError(), KeyboardInterrupt(), ValueError("kept")):
        try:
            raise error
        except BaseException:
            pool.error("Exception closing connection %r", "conn", exc_info=True)
pool.error("after: %s", "kept")
"""


def test_a_library_logging_an_interrupt_it_caught_prints_nothing_on_the_command_line() -> None:
    """Dagster's handler, not the command's, may take the Ctrl-C; SQLAlchemy then logs the
    interrupt it met closing a connection (a traceback on stderr through logging's last-resort
    handler). Those records are dropped while the command runs; every other record is printed."""
    done = subprocess.run(
        [sys.executable, "-c", QUIET_COMMAND], capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    assert "Exception closing connection 'conn'" in lines, done.stderr
    assert lines.count("Exception closing connection 'conn'") == 1, done.stderr
    assert "ValueError: kept" in lines
    assert "DagsterExecutionInterruptedError" not in done.stderr
    assert "KeyboardInterrupt" not in done.stderr
    assert lines[-1] == "after: kept"


WRAPPED_COMMAND = """
import os, signal, time
from maple_assets.cli.errors import quiet_interrupts, reported

signal.signal(signal.SIGINT, signal.default_int_handler)
with quiet_interrupts(debug=False), reported(debug=False):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt as exc:  # as pydantic does while it builds a schema
        raise ValueError(f"Error building validator: {exc!r}") from None
"""


def test_a_ctrl_c_that_a_library_wrapped_in_its_own_error_still_ends_as_an_interrupt() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WRAPPED_COMMAND], capture_output=True, text=True, check=False
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == [INTERRUPTED_MESSAGE]


LOST_IN_A_FINALIZER = """
import os, signal, sys, time, weakref
from maple_assets.cli.errors import quiet_interrupts, reported

class Thing:
    pass

def callback(_ref):  # as the garbage collector runs a library's callback
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, where nothing can propagate
    for _ in range(100_000):
        pass

signal.signal(signal.SIGINT, signal.default_int_handler)
with quiet_interrupts(debug=False), reported(debug=False):
    thing = Thing()
    ref = weakref.ref(thing, callback)
    del thing
    started = time.monotonic()
    while time.monotonic() - started < 20:
        time.sleep(0.01)
    print("ran to the end")
"""

SWALLOWED = """
import os, signal, time
from maple_assets.cli.errors import quiet_interrupts, reported

signal.signal(signal.SIGINT, signal.default_int_handler)
with quiet_interrupts(debug=False), reported(debug=False):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:  # a library that swallows it and carries on
        pass
    print("ran to the end")
"""


@pytest.mark.parametrize("command", [LOST_IN_A_FINALIZER, SWALLOWED])
def test_a_ctrl_c_raised_where_it_cannot_propagate_still_stops_the_command(command: str) -> None:
    """A Ctrl-C that lands in a weakref callback is delivered again and stops the command at
    once (not after its 20 s); one a library swallowed still ends the command as an interrupt."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", command], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == [INTERRUPTED_MESSAGE]
    if command is LOST_IN_A_FINALIZER:
        assert "ran to the end" not in done.stdout
        assert time.monotonic() - started < 15
