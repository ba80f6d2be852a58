"""Driving one job in this process: check everything before the first upload, then run the
enrichment's asset graph to the end (``maple enrich``, ``maple_assets.enrich``, ``maple_job``).

Nothing here imports Dagster until the job runs: ``maple enrich`` checks the job, takes its
driver lease and may start sending a real-time job's first shards (``maple_assets.api.early``)
before Dagster loads, and the Dagster runs then adopt what was sent.
"""

import contextlib
import dataclasses
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from maple_assets.api.early import EarlyStart, starts_early
from maple_assets.api.errors import INTERRUPTED_MESSAGE, is_interrupt, unwrapped_canary
from maple_assets.api.options import CommandOptions, EnrichOptions
from maple_assets.api.result import Result, job_result, recorded_batches
from maple_assets.binding import bind_job, spec_decorations
from maple_assets.declaration import Declared, declare_job
from maple_assets.provider_settings import settings_provider
from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import preflight
from maple_engine.ledger.create_locks import create_locks
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import KINDS, Kind, StopKind
from maple_engine.plan.cache_layout import check_cache_price
from maple_engine.providers.registry import REALTIME_PROVIDERS, Built, capabilities, takes
from maple_engine.send.deadline_lanes import realtime_twin
from maple_engine.settings import Settings
from maple_engine.spec import ALIASES, DEFAULTS, MAX_JOB_NAME, JobSpec, build_spec
from maple_engine.state import JobState
from maple_engine.storage.claims import JobRunning, driver_lease
from maple_engine.storage.storage import Storage
from maple_engine.submit.budget import resume_budget_stop

if TYPE_CHECKING:  # Dagster loads when the job runs, after a real-time job's first requests
    import dagster as dg

    from maple_assets.factory import Enrichment


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


def api_options(opts: EnrichOptions) -> dict[str, str]:
    """``--base-url`` and ``--completion-window`` as provider settings, each checked against
    what the provider takes (a window it accepts, a base URL it has)."""
    caps = capabilities(opts.provider)
    caps.check_window(opts.provider, opts.completion_window)
    given = {"base_url": opts.base_url, "completion_window": opts.completion_window}
    if opts.base_url is not None and not takes(opts.provider, "base_url"):
        raise ConfigError(f"--base-url does not apply to {opts.provider}: drop it.")
    return {k: v.rstrip("/") if k == "base_url" else v for k, v in given.items() if v}


def job_spec(source: str, **options: Any) -> JobSpec:
    """The spec of a job a command runs (``maple enrich``, ``maple embed``,
    ``maple_assets.enrich``, ``maple_job``) over the input ``source``, built once: its options
    as given (the spec's fields, or their aliases), the output beside the input unless given
    (its kind's ``output_name``); unnamed, it is named after the input and the fingerprint of
    what it sends (the same job, the same name)."""
    if options.get("output") is None:
        kind = KINDS.get(str(options.get("kind", DEFAULTS.kind)))
        if kind is not None:  # else the spec refuses the kind
            options["output"] = default_output(source, kind)
    names = ("name", ALIASES["name"])
    if any(options.get(key) is not None for key in names):
        return build_spec(source=source, **options)
    given = {k: v for k, v in options.items() if k not in names}
    spec = build_spec(source=source, name=UNNAMED, **given)
    return spec.model_copy(update={"name": default_job_name(source, spec.fingerprint())})


UNNAMED = "unnamed"  # a job's name until the fingerprint that names it is known


def default_job_name(source: str, fingerprint: str) -> str:
    """``STEM_<8 hex>``: the input's stem as a job name, and the fingerprint's first digits."""
    stem = Path(source.split("?", 1)[0]).stem
    clean = "".join(c if c.isalnum() else "_" for c in stem).strip("_") or "job"
    prefix = clean if clean[0].isalpha() else f"job_{clean}"
    short = prefix.encode()[: MAX_JOB_NAME - 9].decode(errors="ignore")  # room for _<8 hex>
    return f"{short}_{fingerprint[:8]}"


def default_output(source: str, kind: Kind = DEFAULTS.kind) -> str:
    """The output beside the input: ``INPUT_enriched.EXT``; for a kind whose answers need
    Parquet, ``INPUT_embedded.parquet`` whatever the input (``Kind.output_name``)."""
    stem, dot, _ = source.split("?", 1)[0].rpartition(".")
    ext = source.rpartition(".")[2] if dot else "parquet"
    return kind.output_name.format(stem=stem if dot else source, ext=ext)


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
    """A job that passed every check before the first upload: its spec and provider."""

    opts: EnrichOptions
    job: Declared
    provider: Built  # the job's call decorations on it
    price: ModelPrice

    @property
    def spec(self) -> JobSpec:
        return self.job.spec

    @functools.cached_property
    def enrichment(self) -> "Enrichment":
        """The job's asset graph (Dagster loads here)."""
        from maple_assets.factory import graph_of

        return graph_of(self.job, self.opts.input_path)


def prepare(opts: EnrichOptions, emulator: str | None) -> Ready:
    """Check the template, schema, parameters, name, input, output, locations, price, and the
    provider's credentials and endpoint (one cheap call): every usage error surfaces here."""
    job = declare_job(opts.spec)
    spec = job.spec
    api = api_options(opts)  # the command's own provider settings, checked first
    settings = Settings.load(storage=opts.storage_root)
    locks = create_locks(settings.cost_db)
    kept = preflight(spec, opts.storage_root, locks)
    if kept is not None:
        print(kept, file=sys.stderr)
    price = PriceBook(settings.prices).price(  # an unknown model fails here, before sending
        spec.model, opts.provider, allow_untracked=spec.allow_untracked_cost
    )
    check_cache_price(spec, price)  # a cached prefix on a model nothing prices reads for
    overrides = {"storage_root": opts.storage_root, **realtime_limits(opts), **api}
    if capabilities(opts.provider).self_hosted:  # its first contact checks the server's models
        overrides["model"] = spec.model
    provider = settings_provider(opts.provider, settings, emulator, overrides)
    # the first contact goes the job's way: its headers, its extra body (refused here by a
    # provider that takes none), on its team's account (a bad map: refused here)
    provider = provider.decorated(spec_decorations(spec, provider))
    if spec.deadline_s is not None and provider.mode == "batch":
        realtime_twin(provider, opts.storage_root)  # no real-time API to fall back on: fail now
    if not opts.dry_run:
        provider.check_credentials()
        provider.check_endpoint()  # one cheap call: a wrong URL or key ends here, within seconds
        if capabilities(opts.provider).self_hosted and spec.response_schema is not None:
            # a server you run may take one form of response_format only: one probe says which
            provider = provider.settle_schema_format(spec.response_schema)
    return Ready(opts, job, provider, price)


def drive(
    ready: Ready,
    instance: "dg.DagsterInstance | None" = None,
    driver: str = "cli",
    resuming: Any = None,
    *,
    early: bool = False,
    loaded: Callable[[], None] | None = None,
) -> Result:
    """Take the job's driver lease (waiting for another driver with ``wait``) and run the job
    to its end on ``instance`` (default: ``instance_for`` the storage root). ``driver`` tags
    its runs ``maple/driver``; ``resuming(why)`` hears why a stopped job goes on. ``early``:
    a real-time job starts sending before Dagster is imported (``maple_assets.api.early``);
    ``loaded()`` runs once Dagster has been imported."""
    opts, spec = ready.opts, ready.spec
    state = JobState(Storage(opts.storage_root), spec.name)
    waited = False
    try:
        lease = driver_lease(state.storage, state.paths.driver, spec.name, wait=False)
    except JobRunning:
        if not opts.wait:
            raise
        lease = driver_lease(state.storage, state.paths.driver, spec.name, wait=True)
        waited = True
    with lease.hold():
        rerun_lifts = (StopKind.QUOTA, StopKind.CANCEL, StopKind.REPLY)
        lifted = state.clear_stop(rerun_lifts) or resume_budget_stop(state, spec.budget_usd)
        if lifted and resuming is not None:
            resuming(f"resuming job {spec.name} (was stopped: {lifted})")
        # A driver that waited for another reports the job as that run left it ("print its
        # result"); otherwise only what this run sends counts as sent.
        earlier = set() if waited else recorded_batches(state)
        with marks_interrupt(state):
            start = early_start(ready) if early and starts_early(spec) else None
            if start is not None:
                start.wait_first_request()  # then Dagster loads while the shard is sent
            return _run(ready, state, instance, driver, earlier, early=start, loaded=loaded)


def early_start(ready: Ready) -> EarlyStart:
    """The job's first shards, sent on a thread from now until the Dagster runs take over."""
    settings = Settings.load(storage=ready.opts.storage_root)
    storage = Storage(ready.opts.storage_root)
    prices = PriceBook(settings.prices)
    first = threading.Event()
    job = bind_job(
        ready.spec,
        ready.job.policy,
        storage,
        ready.provider,
        costs=None,
        prices=prices,
        sending=first,
    )
    return EarlyStart(job, ready.opts.retry_failed, first).start()


def _run(
    ready: Ready,
    state: JobState,
    instance: "dg.DagsterInstance | None",
    driver: str,
    earlier: set[str],
    *,
    early: EarlyStart | None,
    loaded: Callable[[], None] | None,
) -> Result:
    """Run the job to the end (this process holds the job's driver lease); ``earlier``: the
    batches whose rows this run does not count as its own; ``early``: the first shards being
    sent meanwhile, handed over before the first run."""
    from maple_assets.api.runner import Runner, instance_for  # Dagster loads here
    from maple_assets.wiring import cost_ledger, env_var_keys, wire_resources

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
        instance or instance_for(opts.storage_root),
        poll_interval_s=opts.poll_interval,
        quiet=opts.quiet,
        shard_config={"retry_failed": opts.retry_failed} if opts.retry_failed else None,
        log_level="WARNING" if opts.debug else "CRITICAL",  # errors reach the user as one line
        driver=driver,
    )
    if loaded is not None:
        loaded()
    with unwrapped_canary():
        table = runner.run(adopt=early.handover() if early is not None else [])
    if opts.timings_json:
        Path(opts.timings_json).write_bytes(orjson.dumps(runner.figures()))
    # the ledger resource's URL resolves in runs only (an EnvVar, kept out of job snapshots)
    with cost_ledger(opts.storage_root) as ledger:
        return job_result(state, table.path, ledger, en.spec, earlier)


@contextlib.contextmanager
def marks_interrupt(state: Any) -> Iterator[None]:
    """While a job runs, a Ctrl-C leaves ``interrupted.json`` in its state (``maple status``
    shows ``interrupted``, not ``running``); the next run of the job removes it."""
    state.clear_interrupted()
    try:
        yield
    except BaseException as exc:
        if is_interrupt(exc):
            state.mark_interrupted(INTERRUPTED_MESSAGE)
        raise
