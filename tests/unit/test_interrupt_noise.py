"""A Ctrl-C that Dagster's handler raises inside a garbage-collection callback is not printed as
"Exception ignored in ..." while the driver watches for SIGINT; other such errors still are."""

import sys
import weakref
from typing import Any

import pytest
from dagster._core.errors import DagsterExecutionInterruptedError

from maple_assets.api.errors import is_interrupt
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
