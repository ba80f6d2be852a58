"""Driving one job in this process: check everything before the first upload, then run the
enrichment's asset graph to the end (``maple enrich``, ``maple_assets.enrich``, ``maple_job``)."""

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
from pydantic import BaseModel, Field

from maple_assets.api.errors import INTERRUPTED_MESSAGE, is_interrupt, unwrapped_canary
from maple_assets.api.result import Result, job_result, recorded_batches
from maple_assets.api.runner import Runner, instance_for
from maple_assets.factory import Enrichment, embedding, enrichment, schema_dict
from maple_assets.wiring import env_var_keys, settings_provider, wire_resources
from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import preflight
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.plan.cache_layout import check_cache_price
from maple_engine.providers.base import RequestKind
from maple_engine.providers.registry import REALTIME_PROVIDERS, capabilities
from maple_engine.settings import Settings
from maple_engine.spec import MAX_JOB_NAME, build_spec, job_options
from maple_engine.state import JobState
from maple_engine.storage.claims import JobRunning, driver_lease
from maple_engine.storage.storage import Storage
from maple_engine.submit.budget import resume_budget_stop
from maple_engine.submit.deadline import realtime_twin


class CommandOptions(BaseModel):
    """The options of ``maple enrich`` that are not the job's (those are ``JobSpec``'s): where
    and how this command drives the job."""

    storage: str | None = Field(
        default=None,
        description="Storage root (folder or s3://); default MAPLE_STORAGE or ./.maple.",
    )
    poll_interval: float = Field(default=2.0, description="Seconds between provider polls.")
    emulator_batch_seconds: float = Field(
        default=1.0, description="With --provider emulator: how long a batch takes."
    )
    emulator_fail: tuple[str, ...] = Field(
        default=(), description="With --provider emulator: inject CLASS=RATE faults."
    )
    rpm: int | None = Field(
        default=None,
        ge=1,
        description="Real-time providers: requests per minute (default: learned from headers).",
    )
    tpm: int | None = Field(
        default=None,
        ge=1,
        description="Real-time providers: tokens per minute (default: learned from headers).",
    )
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Real-time providers: most requests in flight at once."
    )
    quiet: bool = Field(default=False, description="No progress line.")
    wait: bool = Field(
        default=False,
        description="If another maple enrich drives this job, wait for it, then print the result "
        "(default: exit at once with code 2, saying where and since when it runs).",
    )
    timings_json: str | None = Field(
        default=None, description="Write per-stage wall times (JSON) to this file."
    )
    dry_run: bool = Field(
        default=False,
        description="Print the plan and the estimated tokens and cost; upload and submit nothing.",
    )
    debug: bool = Field(default=False, description="Show tracebacks and Dagster's warnings.")


class EnrichOptions(CommandOptions):
    """One ``maple enrich``: its input, the job's options as given (``JobSpec`` field names;
    ``name`` None: derived from the input), ``--retry-failed`` and the resolved storage root."""

    input_path: str
    job: dict[str, Any]
    retry_failed: bool
    storage_root: str

    @property
    def provider(self) -> str:
        return str(self.job["provider"])


def realtime_limits(opts: EnrichOptions) -> dict[str, int]:
    """Explicit --rpm/--tpm/--max-concurrency, which only real-time providers take."""
    limits = {"rpm": opts.rpm, "tpm": opts.tpm, "max_concurrency": opts.max_concurrency}
    given = {k: v for k, v in limits.items() if v is not None}
    if given and capabilities(opts.provider).mode != "realtime":
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
        raise ConfigError(
            f"{flags} only apply to real-time providers ({', '.join(REALTIME_PROVIDERS)})."
        )
    return given


def load_schema(given: Any, provider: str) -> dict[str, Any] | None:
    """The response schema: a JSON file's path (the CLI), a dict or a pydantic model (Python)."""
    if given is None:
        return None
    if not isinstance(given, str):
        schema = schema_dict(given)
        check_response_schema(schema, provider, "response_schema")
        return schema
    path = given
    try:
        schema = orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"--response-schema {path}: not valid JSON ({exc}).") from exc
    if not isinstance(schema, dict):
        raise ConfigError(f"--response-schema {path}: a JSON schema must be an object.")
    check_response_schema(schema, provider, f"--response-schema {path}")
    return schema


def default_output(source: str) -> str:
    stem, dot, ext = source.rpartition(".")
    return f"{stem}_enriched.{ext}" if dot else f"{source}_enriched.parquet"


def default_job_name(source: str, fingerprint: str) -> str:
    stem = Path(source.split("?", 1)[0]).stem
    clean = "".join(c if c.isalnum() else "_" for c in stem).strip("_") or "job"
    prefix = clean if clean[0].isalpha() else f"job_{clean}"
    short = prefix.encode()[: MAX_JOB_NAME - 9].decode(errors="ignore")  # room for _<8 hex>
    return f"{short}_{fingerprint[:8]}"


def job_name(opts: EnrichOptions, schema: dict[str, Any] | None) -> str:
    """``--job``, else a name from the input's stem and the fingerprint of what is sent."""
    if opts.job["name"]:
        return str(opts.job["name"])
    probe = build_spec(
        **{**opts.job, "name": "probe", "source": opts.input_path, "response_schema": schema}
    )
    return default_job_name(opts.input_path, probe.fingerprint())


def build_enrichment(opts: EnrichOptions) -> Enrichment:
    """The job's enrichment: the options as given, the schema file read, names filled in."""
    chat = set(job_options(RequestKind.CHAT))
    job = {k: v for k, v in opts.job.items() if k in chat}  # not an embedding's own options
    schema = load_schema(job.pop("response_schema"), opts.provider)
    job |= {
        "name": job_name(opts, schema),
        "output": job["output"] or default_output(opts.input_path),
        "deadline": job.pop("deadline_s"),
    }
    return enrichment(source=opts.input_path, response_schema=schema, **job)


def default_embedding_output(source: str) -> str:
    """``INPUT_embedded.parquet`` beside the input (vectors need Parquet, whatever the input)."""
    stem, dot, _ = source.split("?", 1)[0].rpartition(".")
    return f"{stem if dot else source}_embedded.parquet"


def build_embedding(opts: EnrichOptions) -> Enrichment:
    """The job's embedding (``maple embed``): the options as given, names filled in."""
    job = dict(opts.job)
    job.pop("kind")
    job |= {
        "name": job_name(opts, None),
        "output": job["output"] or default_embedding_output(opts.input_path),
        "deadline": job.pop("deadline_s"),
    }
    return embedding(source=opts.input_path, **job)


def declare(opts: EnrichOptions) -> Enrichment:
    """The job's asset graph: an embedding when its kind says so, else an enrichment."""
    if opts.job.get("kind") == RequestKind.EMBEDDING:
        return build_embedding(opts)
    return build_enrichment(opts)


@contextlib.contextmanager
def emulator_url(opts: EnrichOptions, settings: Settings) -> Iterator[str | None]:
    """The emulator's URL for a provider that runs on it: MAPLE_EMULATOR_URL, or one started
    here for the job's lifetime (``emulator_batch_seconds``, ``emulator_fail``)."""
    if not capabilities(opts.provider).runs_on_emulator:
        yield None
        return
    if settings.emulator_url:
        default = CommandOptions().emulator_batch_seconds
        if opts.emulator_fail or opts.emulator_batch_seconds != default:
            raise ConfigError(
                f"--emulator-fail and --emulator-batch-seconds shape the emulator maple starts, "
                f"but MAPLE_EMULATOR_URL points at a running one ({settings.emulator_url}): "
                "give them to `maple emulator` (--fail, --batch-seconds) or unset the variable."
            )
        yield settings.emulator_url
        return
    from emulator.config import EmulatorConfig, parse_fail
    from emulator.server import EmulatorServer

    try:
        config = EmulatorConfig(
            batch_seconds=opts.emulator_batch_seconds, fail=parse_fail(list(opts.emulator_fail))
        )
    except ValueError as exc:
        raise ConfigError(f"--emulator-fail / --emulator-batch-seconds: {exc}") from None
    with EmulatorServer(config) as server:
        yield server.url


@dataclasses.dataclass(frozen=True)
class Ready:
    """A job that passed every check before the first upload: its enrichment and provider."""

    opts: EnrichOptions
    enrichment: Enrichment
    provider: Any
    price: ModelPrice


def prepare(opts: EnrichOptions, emulator: str | None) -> Ready:
    """Check the template, schema, parameters, name, input, output, locations, price, and the
    provider's credentials and endpoint (one cheap call): every usage error surfaces here."""
    en = declare(opts)
    preflight(en.spec, opts.storage_root)
    settings = Settings.load(storage=opts.storage_root)
    price = PriceBook(settings.prices).price(  # an unknown model fails here, before sending
        en.spec.model, opts.provider, allow_untracked=en.spec.allow_untracked_cost
    )
    check_cache_price(en.spec, price)  # a cached prefix on a model nothing prices reads for
    overrides = {"storage_root": opts.storage_root, **realtime_limits(opts)}
    provider = settings_provider(opts.provider, settings, emulator, overrides)
    if en.spec.deadline_s is not None and provider.mode == "batch":
        realtime_twin(provider, opts.storage_root)  # no real-time API to fall back on: fail now
    if not opts.dry_run:
        provider.check_credentials()
        provider.check_endpoint()  # one cheap call: a wrong URL or key ends here, within seconds
    return Ready(opts, en, provider, price)


def drive(
    ready: Ready,
    instance: dg.DagsterInstance | None = None,
    driver: str = "cli",
    resuming: Any = None,
) -> Result:
    """Take the job's driver lease (waiting for another driver with ``wait``) and run the job
    to its end on ``instance`` (default: ``instance_for`` the storage root). ``driver`` tags
    its runs ``maple/driver``; ``resuming(why)`` hears why a stopped job goes on."""
    opts, en = ready.opts, ready.enrichment
    state = JobState(Storage(opts.storage_root), en.spec.name)
    waited = False
    try:
        lease = driver_lease(state.storage, state.paths.driver, en.spec.name, wait=False)
    except JobRunning:
        if not opts.wait:
            raise
        lease = driver_lease(state.storage, state.paths.driver, en.spec.name, wait=True)
        waited = True
    with lease.hold():
        lifted = state.clear_stop(("quota", "cancel")) or resume_budget_stop(
            state, en.spec.budget_usd
        )
        if lifted and resuming is not None:
            resuming(f"resuming job {en.spec.name} (was stopped: {lifted})")
        # A driver that waited for another reports the job as that run left it ("print its
        # result"); otherwise only what this run sends counts as sent.
        earlier = set() if waited else recorded_batches(state)
        return _run(ready, state, instance or instance_for(opts.storage_root), driver, earlier)


def _run(
    ready: Ready, state: JobState, instance: dg.DagsterInstance, driver: str, earlier: set[str]
) -> Result:
    """Run the job to the end (this process holds the job's driver lease); ``earlier``: the
    batches whose rows this run does not count as its own."""
    opts, en = ready.opts, ready.enrichment
    settings = Settings.load(storage=opts.storage_root)
    resources = wire_resources(
        opts.storage_root,
        {opts.provider: ready.provider},
        cost_db=settings.cost_db,
        prices=settings.prices,
        provider_config={opts.provider: env_var_keys(opts.provider)},  # keys out of snapshots
    )
    runner = Runner(
        en,
        resources,
        instance,
        poll_interval_s=opts.poll_interval,
        quiet=opts.quiet,
        shard_config={"retry_failed": opts.retry_failed} if opts.retry_failed else None,
        log_level="WARNING" if opts.debug else "CRITICAL",  # errors reach the user as one line
        driver=driver,
    )
    try:
        with marks_interrupt(state), unwrapped_canary():
            table = runner.run()
        if opts.timings_json:
            Path(opts.timings_json).write_bytes(orjson.dumps(runner.figures()))
        return job_result(state, table.path, resources["maple_costs"], en.spec, earlier)
    finally:
        resources["maple_costs"].close()


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
