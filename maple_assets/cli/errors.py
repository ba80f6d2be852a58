"""How ``maple`` ends: one line per mistake on stderr, and exit codes a script can act on.

| code | meaning |
|---|---|
| 0 | every row succeeded |
| 1 | anything unexpected (``--debug`` shows the traceback) |
| 2 | usage or validation error: nothing was uploaded |
| 3 | some rows failed (the summary says which classes); `maple reconcile`: drift |
| 4 | the job stopped early (budget, quota, cancel, max age, a failed canary, the breaker) |
| 130 | interrupted (Ctrl-C); rerun the same command to resume |
"""

import _thread
import contextlib
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any, NoReturn

import click

from maple_assets.api.errors import (
    INTERRUPTED_MESSAGE,
    is_interrupt,
    one_line,
    usage_error,
    user_error,
)
from maple_assets.api.result import STATUSES, job_status
from maple_engine.errors import (
    BreakerOpen,
    CanaryFailed,
    MapleError,
    QuotaExhausted,
    ReplyMismatch,
)
from maple_engine.send.drain import DRAIN, DRAIN_S

OK = 0
UNEXPECTED = 1
USAGE = 2
ROWS_FAILED = 3
STOPPED = 4
INTERRUPTED = 130
EXIT_CODES = dict(zip(STATUSES, (OK, ROWS_FAILED, STOPPED), strict=True))
#: Set once a Ctrl-C reached the command: whatever then ends it is the interrupt, even when a
#: library caught the KeyboardInterrupt and raised its own error (pydantic building a schema
#: raises a SchemaError that only names it)
_CTRL_C = threading.Event()


def outcome_code(totals: dict[str, Any], stop: dict[str, str] | None) -> int:
    """The exit code of a job that ran to its end (or to its stop)."""
    return EXIT_CODES[job_status(totals, stop)]


def fail(exc: BaseException, debug: bool) -> NoReturn:
    """Print ``exc`` as one line (and its traceback with ``--debug``) and exit with its code."""
    if debug:
        traceback.print_exception(exc)
    if is_interrupt(exc) or _CTRL_C.is_set():  # a library may have wrapped the interrupt
        click.echo(f"\n{INTERRUPTED_MESSAGE}", err=True)
        sys.exit(INTERRUPTED)
    found = user_error(exc)
    usage = usage_error(found)
    if usage is not None:
        click.echo(f"error: {one_line(usage)}", err=True)
        sys.exit(USAGE)
    # before a batch went out, or before more requests did
    if isinstance(found, (QuotaExhausted, CanaryFailed, BreakerOpen, ReplyMismatch)):
        click.echo(f"stopped: {one_line(found)}", err=True)
        sys.exit(STOPPED)
    if isinstance(found, MapleError):
        click.echo(f"error: {one_line(found)}", err=True)
        sys.exit(UNEXPECTED)
    hint = "" if debug else " (rerun with --debug for the traceback)"
    click.echo(f"error: unexpected {type(found).__name__}: {one_line(found)}{hint}", err=True)
    sys.exit(UNEXPECTED)


@contextlib.contextmanager
def reported(debug: bool) -> Iterator[None]:
    """Run the command body; whatever escapes it ends as one line and an exit code."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the CLI's one boundary that reports errors
        fail(exc, debug)
    if _CTRL_C.is_set():  # a library swallowed the interrupt and the command ran on
        fail(KeyboardInterrupt(), debug)


@contextlib.contextmanager
def engine_warnings_on_stderr() -> Iterator[None]:
    """The engine's warnings (a provider call retrying through an outage, say) as one
    ``maple: ...`` line each on stderr while a job runs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("maple: %(message)s"))
    engine = logging.getLogger("maple")
    engine.addHandler(handler)
    try:
        yield
    finally:
        engine.removeHandler(handler)


def _deliver_again() -> None:
    """SIGINT once more, from another thread a moment from now: the main thread takes it at
    its next chance, by then out of the finalizer it was lost in (or lost again, and sent again)."""
    later = threading.Timer(0.01, _thread.interrupt_main)
    later.daemon = True
    later.start()


@contextlib.contextmanager
def quiet_interrupts(debug: bool) -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt as usual; without ``--debug`` it also silences the
    logging and "Exception ignored" noise libraries print while they unwind. A first Ctrl-C
    while real-time requests are in flight drains them instead (`maple_engine.send.drain`),
    with ``--debug`` too: nothing more is sent, their answers are kept, then the command stops
    as interrupted.

    The interrupt may reach Dagster's own handler (it raises its own error while a step runs)
    rather than this one, so a log record or an unraisable exception that carries an
    interrupt is dropped whichever handler raised it.

    A Ctrl-C that lands while the main thread runs a finalizer or a weakref callback (the
    garbage collector's, say) raises where Python cannot propagate it: it would be lost and
    the command run on. It is delivered again, to be raised where the command can stop."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield  # SIGINT ignored / handled by whoever started us
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        first = not _CTRL_C.is_set()
        _CTRL_C.set()
        if first and DRAIN.request():  # real-time requests in flight: keep what was paid for
            click.echo(
                f"stopping: waiting up to {DRAIN_S:.0f} s for the requests in flight, to keep "
                "their answers (Ctrl-C again stops at once)",
                err=True,
            )
            return
        if not debug:
            logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        if debug:  # every line and traceback shown
            yield
        else:
            with _silenced():
                yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """The noise of unwinding after a Ctrl-C dropped, and an interrupt lost in a finalizer
    delivered again."""
    previous_hook = sys.unraisablehook

    def unraisable(raised: Any) -> None:
        interrupt = raised.exc_value is not None and is_interrupt(raised.exc_value)
        if interrupt and _CTRL_C.is_set():
            _deliver_again()  # raised in a finalizer: lost unless sent again
        elif not interrupt and not _CTRL_C.is_set():  # after a Ctrl-C: unwinding noise
            previous_hook(raised)

    def not_an_interrupt(record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or not is_interrupt(exc)

    handlers = [h for h in (logging.lastResort, *logging.getLogger().handlers) if h is not None]
    for each in handlers:
        each.addFilter(not_an_interrupt)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for each in handlers:
            each.removeFilter(not_an_interrupt)
