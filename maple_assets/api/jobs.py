"""``maple_assets.enrich`` and ``maple_assets.submit``: run a job from Python with exactly the
semantics of ``maple enrich`` (resume, reuse, budgets, leases), in this process.

    result = maple_assets.enrich("items.csv", prompt="Brand of {title}?", model="gpt-4o-mini")
    result.status, result.sent, result.reused, result.cost_usd, result.output

The keywords are the job spec's fields (``maple_engine.spec.JobSpec``) and the command's
options (``CommandOptions``), as the CLI's long options with underscores: ``budget_usd`` (or
``budget``), ``deadline`` ("6h", seconds or a timedelta), ``params`` (a dict), ``retries``
(``{"server_error": 3}`` or ``"unlimited"``), ``response_schema`` (a dict, a pydantic model or a
JSON file's path), ``retry_failed``, ``storage``, ``wait``... A call that cannot start raises a
``UsageError`` before anything is uploaded; a job that ends early is a ``Result`` whose
``status`` is ``stopped``.
"""

import dataclasses
import threading
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from pydantic import ValidationError

from maple_assets.api.distill import drive_job
from maple_assets.api.driver import Ready, drive, emulator_url, job_spec, prepare
from maple_assets.api.errors import InvalidJob, typed_usage_errors, usage_error
from maple_assets.api.options import CommandOptions, EnrichOptions
from maple_assets.api.progress import Counts
from maple_assets.api.result import Result
from maple_assets.api.runner import job_counts
from maple_assets.wiring import job_eta_now
from maple_engine.send.lane import lane_of
from maple_engine.settings import Settings
from maple_engine.spec import ALIASES, DEFAULTS, JobSpec, validation_message
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from maple_engine.submit.cancel import cancel_job
from maple_engine.submit.eta import Eta

NOT_HERE = {"dry_run"}  # the CLI's: it prints a plan; ``maple enrich --dry-run``
COMMAND_FIELDS = {f for f in CommandOptions.model_fields if f not in NOT_HERE} | {"retry_failed"}
# The job's keywords: the spec's fields and their aliases (``job``, ``budget``, ``deadline``),
# but for the input, which is ``input``.
JOB_KEYS = {*JobSpec.model_fields, *ALIASES.values()} - {"source", ALIASES["source"]}
OPTIONS = sorted({*JOB_KEYS, *COMMAND_FIELDS, ALIASES["source"]} - {"name"})


def enrich_options(input: str, **given: Any) -> EnrichOptions:
    """The options of one job from keywords (``job``: its name; unset: derived as the CLI
    derives it); an unknown keyword or a bad value is an ``InvalidJob``."""
    job: dict[str, Any] = {}
    command: dict[str, Any] = {"quiet": True, "retry_failed": False}
    for key, value in given.items():
        if key in JOB_KEYS:
            job[key] = value
        elif key in COMMAND_FIELDS:
            command[key] = value
        else:
            raise InvalidJob(
                f"unknown option {key!r}: give one of {', '.join(OPTIONS)} "
                "(the job spec's fields, as `maple enrich --help` lists them)."
            )
    spec = job_spec(str(input), **job)
    storage = Settings.load(storage=command.get("storage")).storage_root
    try:
        return EnrichOptions(spec=spec, storage_root=storage, **command)
    except ValidationError as exc:
        raise InvalidJob(validation_message(exc)) from None


def run(
    opts: EnrichOptions, instance: dg.DagsterInstance | None = None, driver: str = "api"
) -> Result:
    """Check the job, then run it to its end (``UsageError`` if it cannot start)."""
    settings = Settings.load(storage=opts.storage_root)
    with typed_usage_errors(), emulator_url(opts, settings) as url:
        ready = prepare(opts, url)  # every check of the job before anything is spent
        return drive_job(ready, url, lambda step: drive(step, instance, driver))


def enrich(
    input: str,
    *,
    prompt: str,
    model: str,
    provider: str = DEFAULTS.provider,
    job: str | None = None,
    team: str = DEFAULTS.team,
    output: str | None = None,
    **options: Any,
) -> Result:
    """Enrich ``input`` (CSV or Parquet, local or s3://) with one model reply per row and
    return the run's figures; rerun with the same ``job`` to resume or update it."""
    with typed_usage_errors():
        opts = enrich_options(
            input, prompt=prompt, model=model, provider=provider, job=job, team=team,
            output=output, **options,
        )  # fmt: skip
    return run(opts)


def submit(input: str, **options: Any) -> "JobHandle":
    """Start ``enrich(input, **options)`` (the same keywords) in a background thread once every
    check passed (a ``UsageError`` raises here), and return its handle."""
    with typed_usage_errors():
        handle = JobHandle(enrich_options(input, **options))
    handle.start()
    return handle


class JobStatus(str):
    """A job's status word, with its expected finish (`maple_engine.submit.eta.Eta`): ``eta``,
    and ``eta_p50`` / ``eta_p90`` as UTC datetimes (None: unknown or finished)."""

    eta: Eta

    def __new__(cls, word: str, eta: Eta) -> "JobStatus":
        status = super().__new__(cls, word)
        status.eta = eta
        return status

    @property
    def eta_p50(self) -> datetime | None:
        return _when(self.eta.p50_at)

    @property
    def eta_p90(self) -> datetime | None:
        return _when(self.eta.p90_at)


def _when(at: float | None) -> datetime | None:
    return None if at is None else datetime.fromtimestamp(at, UTC)


class JobHandle:
    """A job running in this process: ``status()``, ``wait()``, ``cancel()``."""

    def __init__(self, opts: EnrichOptions) -> None:
        self.opts = opts
        self.job = opts.spec.name
        self.state = JobState(Storage(opts.storage_root), self.job)
        self._ready: Ready | None = None
        self._result: Result | None = None
        self._error: BaseException | None = None
        self._checked = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"maple {self.job}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._checked.wait()
        if self._error is not None and usage_error(self._error) is not None:
            raise self._error

    def _run(self) -> None:
        try:
            with typed_usage_errors():
                settings = Settings.load(storage=self.opts.storage_root)
                with emulator_url(self.opts, settings) as url:
                    self._ready = prepare(self.opts, url)
                    self._checked.set()
                    self._result = drive_job(self._ready, url, lambda s: drive(s, driver="api"))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by wait()
            self._error = exc
        finally:
            self._checked.set()

    def status(self) -> "JobStatus":
        """``running``, or how it ended: ``succeeded``, ``rows_failed``, ``stopped``, ``error``;
        a string that also carries the expected finish (``.eta``, ``.eta_p50``, ``.eta_p90``)."""
        if self._thread.is_alive():
            return JobStatus("running", job_eta_now(self.state))
        if self._result is not None:
            return JobStatus(self._result.status, job_eta_now(self.state))
        return JobStatus("error", job_eta_now(self.state))

    def progress(self) -> Counts:
        """Shards submitted and final, rows done, spend so far, the expected finish (from the
        job's state and the batch history)."""
        eta = job_eta_now(self.state)
        return dataclasses.replace(job_counts(self.state), eta_p50=eta.p50_at, eta_p90=eta.p90_at)

    def wait(self, timeout: float | None = None) -> Result:
        """The result once the job ends; its error if it failed; ``TimeoutError`` if it is
        still running after ``timeout`` seconds."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job {self.job} is still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        """Stop new submissions and cancel the batches in flight, as ``maple cancel`` does;
        the job then ends ``stopped`` and a rerun with the same ``job`` resumes it."""
        if self._ready is not None:
            cancel_job(self.state, lane_of(self._ready.provider))
