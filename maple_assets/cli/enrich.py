"""``maple enrich``: build the job's enrichment, run it in-process, print the summary."""

import dataclasses
from pathlib import Path
from typing import Any

import click
import orjson

from maple_assets.cli.dry_run import dry_run, percent
from maple_assets.cli.errors import marks_interrupt, outcome_code
from maple_assets.cli.runner import Runner, instance_for
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import env_var_keys, settings_provider, wire_resources
from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import preflight
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.settings import Settings
from maple_engine.spec import MAX_JOB_NAME, JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from maple_engine.submit.budget import ledger_totals, resume_budget_stop
from maple_engine.submit.claims import driver_lease
from maple_engine.submit.deadline import deadline_split, parse_duration, realtime_twin


@dataclasses.dataclass
class EnrichOptions:
    input_path: str
    prompt: str
    model: str
    storage: str
    provider: str = "openai"
    system: str | None = None
    output: str | None = None
    team: str = "default"
    job_name: str | None = None
    max_requests_per_batch: int = 50_000
    max_batch_bytes: int = 200_000_000
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    response_schema: str | None = None
    image_column: str | None = None
    retries: dict[str, int] = dataclasses.field(default_factory=dict)
    no_image_check: bool = False
    poll_interval: float = 2.0
    emulator_batch_seconds: float = 1.0
    emulator_fail: tuple[str, ...] = ()
    quiet: bool = False
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    timings_json: str | None = None
    dry_run: bool = False
    budget: float | None = None
    allow_untracked_cost: bool = False
    no_reuse: bool = False
    retry_failed: bool = False
    debug: bool = False
    wait: bool = False
    max_enqueued_tokens: int | None = None
    priority: int = 0
    deadline: str | None = None


def realtime_limits(opts: EnrichOptions) -> dict[str, int]:
    """Explicit --rpm/--tpm/--max-concurrency, which only real-time providers take."""
    limits = {"rpm": opts.rpm, "tpm": opts.tpm, "max_concurrency": opts.max_concurrency}
    given = {k: v for k, v in limits.items() if v is not None}
    if given and not opts.provider.endswith("-realtime"):
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
        raise ConfigError(f"{flags} only apply to real-time providers (openai-realtime, ...).")
    return given


def load_schema(path: str | None, provider: str) -> dict[str, Any] | None:
    if path is None:
        return None
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


def spec_fields(opts: EnrichOptions, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The options that decide what is sent (and so the job's fingerprint)."""
    return {
        "prompt": opts.prompt,
        "model": opts.model,
        "provider": opts.provider,
        "system": opts.system,
        "params": opts.params,
        "response_schema": schema,
        "image_column": opts.image_column,
        "max_requests_per_batch": opts.max_requests_per_batch,
        "max_batch_bytes": opts.max_batch_bytes,
    }


def job_name(opts: EnrichOptions, schema: dict[str, Any] | None) -> str:
    if opts.job_name:
        return opts.job_name
    probe = JobSpec(name="probe", source=opts.input_path, **spec_fields(opts, schema))
    return default_job_name(opts.input_path, probe.fingerprint())


def run_enrich(opts: EnrichOptions, emulator_url: str | None) -> int:
    schema = load_schema(opts.response_schema, opts.provider)
    output = opts.output or default_output(opts.input_path)
    en = enrichment(
        name=job_name(opts, schema),
        source=opts.input_path,
        team=opts.team,
        output=output,
        **spec_fields(opts, schema),
        retries=opts.retries,
        budget_usd=opts.budget,
        allow_untracked_cost=opts.allow_untracked_cost,
        check_images=not opts.no_image_check,
        reuse=not opts.no_reuse,
        max_enqueued_tokens=opts.max_enqueued_tokens,
        priority=opts.priority,
        deadline=parse_duration(opts.deadline, "--deadline") if opts.deadline else None,
    )
    preflight(en.spec, opts.storage)
    settings = Settings.load(storage=opts.storage)
    price = PriceBook(settings.prices).price(  # an unknown model fails here, before sending
        opts.model, opts.provider, allow_untracked=opts.allow_untracked_cost
    )
    provider = settings_provider(opts.provider, settings, emulator_url, realtime_limits(opts))
    if en.spec.deadline_s is not None and getattr(provider, "mode", "batch") == "batch":
        realtime_twin(provider, opts.storage)  # no real-time API to fall back on: fail now
    if opts.dry_run:
        return dry_run(en.spec, provider, price, opts.storage, opts.retry_failed)
    provider.check_credentials()
    state = JobState(Storage(opts.storage), en.spec.name)
    lease = driver_lease(state.storage, state.paths.driver, en.spec.name, opts.wait)
    with lease.hold():
        return _drive(opts, en, provider, state)


def _drive(opts: EnrichOptions, en: Enrichment, provider: Any, state: JobState) -> int:
    """Run the job to the end (this process holds the job's driver lease)."""
    lifted = state.clear_stop(("quota", "cancel")) or resume_budget_stop(state, opts.budget)
    if lifted:
        click.echo(f"resuming job {en.spec.name} (was stopped: {lifted})", err=True)
    settings = Settings.load(storage=opts.storage)
    resources = wire_resources(
        opts.storage,
        {opts.provider: provider},
        cost_db=settings.cost_db,
        prices=settings.prices,
        provider_config={opts.provider: env_var_keys(opts.provider)},  # keys out of snapshots
    )
    runner = Runner(
        en,
        resources,
        instance_for(opts.storage),
        poll_interval_s=opts.poll_interval,
        quiet=opts.quiet,
        shard_config={"retry_failed": opts.retry_failed} if opts.retry_failed else None,
        log_level="WARNING" if opts.debug else "CRITICAL",  # errors reach the user as one line
    )
    try:
        with marks_interrupt(state):
            table = runner.run()
        if opts.timings_json:
            Path(opts.timings_json).write_bytes(
                orjson.dumps(
                    {
                        "stages": runner.timings,
                        "runs": runner.runs,
                        "ticks": runner.ticks,
                        "peak_rss_mib": runner.peak_rss_mib,
                    }
                )
            )
        totals = print_summary(state, table.path, resources["maple_costs"], en.spec)
    finally:
        resources["maple_costs"].close()
    return outcome_code(totals, state.stop_record())


def print_summary(
    state: JobState, output: str, costs: CostLedger | None = None, spec: JobSpec | None = None
) -> dict[str, Any]:
    from maple_engine.collect.responses import add_summary, summarize
    from maple_engine.steps import shard_responses

    merged = state.paths.merged
    totals: dict[str, Any] = {}
    if state.storage.exists(merged):  # written by the merge that just ran
        totals = dict(state.storage.read_json(merged).get("totals") or {})
    if not totals:
        for shard in state.manifest() or []:
            add_summary(totals, summarize(shard_responses(state, shard.key)))
    by_class: dict[str, int] = totals.get("failed_by_class", {})
    click.echo("", err=True)
    click.echo(f"{'job':<15}{state.job}")
    for key in ("rows", "succeeded", "failed"):
        click.echo(f"{key:<15}{totals[key]:,}")
    for cls, count in sorted(by_class.items()):
        click.echo(f"  {cls:<13}{count:,}")
    if "sent" in totals:
        click.echo(f"{'sent':<15}{totals['sent']:,}")
        reused = totals.get("reused", 0)
        click.echo(
            f"{'reused':<15}{reused:,}  (not sent: answered by an earlier run or an identical row)"
        )
    click.echo(f"{'input tokens':<15}{totals['input_tokens']:,}")
    click.echo(f"{'output tokens':<15}{totals['output_tokens']:,}")
    click.echo(f"{'cost USD':<15}{totals['cost_usd']:.6f}")
    if costs is not None:
        shards = {s.key for s in state.manifest() or []}
        ledger = ledger_totals(costs, state.job, shards)  # this run's spend
        saved = ledger["savings_usd"]
        share = percent(saved, ledger["realtime_cost_usd"])
        click.echo(f"{'real-time USD':<15}{ledger['realtime_cost_usd']:.6f}")
        click.echo(f"{'saved USD':<15}{saved:.6f}{share} vs real-time prices")
        if spec is not None and spec.deadline_s is not None:
            _print_deadline(state, costs, shards, spec)
    click.echo(f"{'output':<15}{output}")
    stop = state.stop_reason()
    if stop:
        click.echo(f"stopped: {stop}", err=True)
    return totals


def _print_deadline(state: JobState, costs: CostLedger, shards: set[str], spec: JobSpec) -> None:
    """With a deadline: how many rows went by batch and by real-time, and what it cost."""
    price = PriceBook(costs.prices).price(spec.model, spec.provider, allow_untracked=True)
    split = deadline_split(costs, state.job, shards, price)
    click.echo(f"{'batch rows':<15}{split['batch_rows']:,}")
    click.echo(
        f"{'real-time rows':<15}{split['realtime_rows']:,}  (sent real-time to meet the deadline)"
    )
    click.echo(
        f"{'deadline USD':<15}{split['deadline_cost_usd']:.6f}  (real-time rows cost "
        f"{split['realtime_cost_usd']:.6f}; this much more than at batch prices)"
    )
