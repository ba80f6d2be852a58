"""How ``maple`` ends: one line per mistake on stderr, and exit codes a script can act on.

| code | meaning |
|---|---|
| 0 | every row succeeded |
| 1 | anything unexpected (``--debug`` shows the traceback) |
| 2 | usage or validation error: nothing was uploaded |
| 3 | some rows failed (the summary says which classes); `maple reconcile`: drift |
| 4 | the job stopped early (budget, quota, cancel, max age) |
| 130 | interrupted (Ctrl-C); rerun the same command to resume |
"""

import contextlib
import logging
import signal
import sys
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any, NoReturn

import click

from maple_engine.errors import AuthError, ConfigError, MapleError, StorageError

OK = 0
UNEXPECTED = 1
USAGE = 2
ROWS_FAILED = 3
STOPPED = 4
INTERRUPTED = 130
INTERRUPTED_MESSAGE = (
    "stopped; batches already submitted keep running at the provider; rerun the same command "
    "to resume"
)


def outcome_code(totals: dict[str, Any], stop: dict[str, str] | None) -> int:
    """The exit code of a job that ran to its end (or to its stop)."""
    if stop is not None:
        return STOPPED
    return ROWS_FAILED if int(totals.get("failed", 0)) > 0 else OK


def user_error(exc: BaseException) -> BaseException:
    """The error the user should see: our own error inside Dagster's wrappers, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (MapleError, KeyboardInterrupt)):
            return current
        seen.add(id(current))
        inner = getattr(current, "user_exception", None)
        current = inner if isinstance(inner, BaseException) else current.__cause__
    return exc


def is_interrupt(exc: BaseException) -> bool:
    from dagster._core.errors import DagsterExecutionInterruptedError

    found = user_error(exc)
    return isinstance(found, (KeyboardInterrupt, DagsterExecutionInterruptedError))


def fail(exc: BaseException, debug: bool) -> NoReturn:
    """Print ``exc`` as one line (and its traceback with ``--debug``) and exit with its code."""
    if debug:
        traceback.print_exception(exc)
    if is_interrupt(exc):
        click.echo(f"\n{INTERRUPTED_MESSAGE}", err=True)
        sys.exit(INTERRUPTED)
    found = user_error(exc)
    setup = setup_problem(found)
    if setup is not None:
        click.echo(f"error: {setup}", err=True)
        sys.exit(USAGE)
    if isinstance(found, (ConfigError, StorageError, AuthError)):
        click.echo(f"error: {_one_line(found)}", err=True)
        sys.exit(USAGE)
    if isinstance(found, MapleError):
        click.echo(f"error: {_one_line(found)}", err=True)
        sys.exit(UNEXPECTED)
    hint = "" if debug else " (rerun with --debug for the traceback)"
    click.echo(f"error: unexpected {type(found).__name__}: {_one_line(found)}{hint}", err=True)
    sys.exit(UNEXPECTED)


def setup_problem(exc: BaseException) -> str | None:
    """A library's error that means the setup is wrong (no credentials, a database that does not
    answer), as the one line that names the fix; ``None`` for anything else."""
    kind = f"{type(exc).__module__}.{type(exc).__name__}"
    if kind in {
        "botocore.exceptions.NoCredentialsError",
        "botocore.exceptions.PartialCredentialsError",
    }:
        return (
            "no AWS credentials for the s3:// storage root: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or use a local --storage folder."
        )
    if kind == "botocore.exceptions.EndpointConnectionError":
        return f"{_one_line(exc)}: check AWS_ENDPOINT_URL and the network."
    if kind == "sqlalchemy.exc.OperationalError":
        return (
            f"the cost ledger's database did not answer: {_one_line(getattr(exc, 'orig', exc))} "
            "Check --db / MAPLE_COST_DB."
        )
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def reported(debug: bool) -> Iterator[None]:
    """Run the command body; whatever escapes it ends as one line and an exit code."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the CLI's one boundary that reports errors
        fail(exc, debug)


@contextlib.contextmanager
def marks_interrupt(state: Any) -> Iterator[None]:
    """While a job runs, a Ctrl-C leaves ``interrupted.json`` in its state (``maple status``
    shows ``interrupted``, not ``running``); the next run of the job removes it."""
    key = state.paths.interrupted
    state.storage.delete(key)
    try:
        yield
    except BaseException as exc:
        if is_interrupt(exc):
            state.storage.write_json(key, {"reason": INTERRUPTED_MESSAGE})
        raise


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


@contextlib.contextmanager
def quiet_interrupts(debug: bool) -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt as usual; without ``--debug`` it also silences the
    logging and "Exception ignored" noise libraries print while they unwind."""
    previous = signal.getsignal(signal.SIGINT)
    if debug or previous is not signal.default_int_handler:
        yield  # --debug, or SIGINT ignored / handled by whoever started us
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        logging.disable(logging.CRITICAL)
        sys.unraisablehook = lambda _: None
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
