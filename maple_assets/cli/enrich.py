"""``maple enrich``: build the job's enrichment, run it in-process, print the summary."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson
from pydantic import BaseModel, Field

from maple_assets.cli.dry_run import dry_run, percent
from maple_assets.cli.errors import engine_warnings_on_stderr, marks_interrupt, outcome_code
from maple_assets.cli.runner import Runner, instance_for
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import env_var_keys, settings_provider, wire_resources
from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import preflight
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.providers.registry import REALTIME_PROVIDERS, capabilities
from maple_engine.settings import Settings
from maple_engine.spec import MAX_JOB_NAME, JobSpec, build_spec
from maple_engine.state import JobState
from maple_engine.storage.claims import driver_lease
from maple_engine.storage.storage import Storage
from maple_engine.submit.budget import ledger_totals, resume_budget_stop
from maple_engine.submit.deadline import deadline_split, realtime_twin


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
    job = dict(opts.job)
    schema = load_schema(job.pop("response_schema"), opts.provider)
    job |= {
        "name": job_name(opts, schema),
        "output": job["output"] or default_output(opts.input_path),
        "deadline": job.pop("deadline_s"),
    }
    return enrichment(source=opts.input_path, response_schema=schema, **job)


def run_enrich(
    opts: EnrichOptions,
    emulator_url: str | None,
    declare: Callable[[EnrichOptions], Enrichment] = build_enrichment,
) -> int:
    """Run the job ``declare`` makes of ``opts`` (an enrichment, or ``maple embed``'s)."""
    en = declare(opts)
    preflight(en.spec, opts.storage_root)
    settings = Settings.load(storage=opts.storage_root)
    price = PriceBook(settings.prices).price(  # an unknown model fails here, before sending
        en.spec.model, opts.provider, allow_untracked=en.spec.allow_untracked_cost
    )
    overrides = {"storage_root": opts.storage_root, **realtime_limits(opts)}
    provider = settings_provider(opts.provider, settings, emulator_url, overrides)
    if en.spec.deadline_s is not None and provider.mode == "batch":
        realtime_twin(provider, opts.storage_root)  # no real-time API to fall back on: fail now
    if opts.dry_run:
        return dry_run(en.spec, provider, price, opts.storage_root, opts.retry_failed)
    provider.check_credentials()
    provider.check_endpoint()  # one cheap call: a wrong URL or key ends here, within seconds
    state = JobState(Storage(opts.storage_root), en.spec.name)
    lease = driver_lease(state.storage, state.paths.driver, en.spec.name, opts.wait)
    with lease.hold():
        return _drive(opts, en, provider, state)


def _drive(opts: EnrichOptions, en: Enrichment, provider: Any, state: JobState) -> int:
    """Run the job to the end (this process holds the job's driver lease)."""
    lifted = state.clear_stop(("quota", "cancel")) or resume_budget_stop(state, en.spec.budget_usd)
    if lifted:
        click.echo(f"resuming job {en.spec.name} (was stopped: {lifted})", err=True)
    settings = Settings.load(storage=opts.storage_root)
    resources = wire_resources(
        opts.storage_root,
        {opts.provider: provider},
        cost_db=settings.cost_db,
        prices=settings.prices,
        provider_config={opts.provider: env_var_keys(opts.provider)},  # keys out of snapshots
    )
    runner = Runner(
        en,
        resources,
        instance_for(opts.storage_root),
        poll_interval_s=opts.poll_interval,
        quiet=opts.quiet,
        shard_config={"retry_failed": opts.retry_failed} if opts.retry_failed else None,
        log_level="WARNING" if opts.debug else "CRITICAL",  # errors reach the user as one line
    )
    try:
        with marks_interrupt(state), engine_warnings_on_stderr():
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
