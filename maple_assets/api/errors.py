"""The errors ``maple_assets.enrich`` and ``submit`` raise for a job that cannot start.

    UsageError          nothing was uploaded; fix the call and run it again (``maple``: exit 2)
    ├── InvalidJob      the job's options, input, template or response schema
    ├── SetupError      storage root, credentials, cost ledger or provider endpoint
    └── JobBusy         another driver runs this job now (``wait=True`` waits for it)

Each message is one line naming the problem and the fix; ``__cause__`` is the error found.
A job that runs and ends early (budget, quota, cancel) is no error: its ``Result`` says so.
"""

import contextlib
import sys
from collections.abc import Iterator

from maple_engine.errors import CanaryFailed, ConfigError, MapleError, SetupRefused, StorageError
from maple_engine.storage.claims import JobRunning


class UsageError(MapleError):
    """The job could not start as given; nothing was uploaded."""


class InvalidJob(UsageError, ValueError):
    """The job's options, input, template or response schema are unusable."""


class SetupError(UsageError):
    """The storage root, credentials, cost ledger or provider endpoint do not work."""


class JobBusy(UsageError):
    """Another driver (``maple enrich``, an application, a Dagster run) runs this job now."""


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


INTERRUPTED_MESSAGE = (
    "stopped; batches already submitted keep running at the provider; rerun the same command "
    "to resume"
)


def is_interrupt(exc: BaseException) -> bool:
    """A Ctrl-C, also as Dagster re-raised it. Dagster is not imported here: a Ctrl-C may land
    while it is being imported, and importing it again from a half-loaded package fails (only
    a loaded Dagster can have raised its own error)."""
    errors = sys.modules.get("dagster._core.errors")
    dagsters = getattr(errors, "DagsterExecutionInterruptedError", None)
    kinds = (KeyboardInterrupt, dagsters) if isinstance(dagsters, type) else (KeyboardInterrupt,)
    return isinstance(user_error(exc), kinds)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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
        return f"{one_line(exc)}: check AWS_ENDPOINT_URL and the network."
    if kind == "sqlalchemy.exc.OperationalError":
        return (
            f"the cost ledger's database did not answer: {one_line(getattr(exc, 'orig', exc))} "
            "Check --db / MAPLE_COST_DB."
        )
    return None


def usage_error(exc: BaseException) -> UsageError | None:
    """``exc`` (or the error inside Dagster's wrappers) as a ``UsageError``; ``None`` when it
    is not one (a failure while the job ran, a bug, an interrupt)."""
    found = user_error(exc)
    if isinstance(found, UsageError):
        return found
    setup = setup_problem(found)
    if setup is not None:
        return SetupError(setup)
    if isinstance(found, JobRunning):
        return JobBusy(one_line(found))
    if isinstance(found, ConfigError):
        return InvalidJob(one_line(found))
    if isinstance(found, (StorageError, SetupRefused)):  # a refused key among them
        return SetupError(one_line(found))
    return None


@contextlib.contextmanager
def unwrapped_canary() -> Iterator[None]:
    """A failed canary raises ``CanaryFailed`` itself, not Dagster's failure around it."""
    try:
        yield
    except Exception as exc:
        found = user_error(exc)
        if isinstance(found, CanaryFailed) and found is not exc:
            raise found from exc
        raise


@contextlib.contextmanager
def typed_usage_errors() -> Iterator[None]:
    """Raise a ``UsageError`` (from the error found) for whatever means the call was wrong."""
    try:
        yield
    except UsageError:
        raise
    except Exception as exc:
        typed = usage_error(exc)
        if typed is None:
            raise
        raise typed from exc
