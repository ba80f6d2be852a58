"""``maple enrich``: check the job and run it through the Python API's driver, then print the
summary and exit with the code of the README's table."""

import click

from maple_assets.api.distill import run_distilled
from maple_assets.api.driver import Ready, drive, emulator_url, prepare
from maple_assets.api.options import EnrichOptions
from maple_assets.api.result import Result
from maple_assets.cli.dry_run import dry_run, percent
from maple_assets.cli.errors import EXIT_CODES, engine_warnings_on_stderr
from maple_engine.canary import last_canary
from maple_engine.collect.accounting import describe
from maple_engine.ledger.price_book import SELF_HOSTED
from maple_engine.memory import settle_startup_objects
from maple_engine.plan.cache_layout import cache_layout
from maple_engine.settings import Settings
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage


def run_enrich(opts: EnrichOptions, settings: Settings) -> int:
    """Run the job (or print its dry run) and return the exit code."""
    with emulator_url(opts, settings) as url:
        ready = prepare(opts, url)
        if opts.dry_run:
            settle_startup_objects()  # no Dagster run follows: the collector runs from here
            spec, root = ready.spec, opts.storage_root
            return dry_run(spec, ready.provider, ready.price, root, opts.retry_failed)
        if opts.spec.distill:
            with engine_warnings_on_stderr():
                result, report = run_distilled(opts, url, _quiet_drive)
            finished = result.status != "stopped"  # else the summary says why it stopped
            if finished and report.refused:
                click.echo(report.refused, err=True)
            print_summary(result, ready.spec, ready.price.source)
            for line in report.lines() if finished else []:
                click.echo(line)
            return EXIT_CODES[result.status]
        with engine_warnings_on_stderr():
            result = drive(
                ready,
                resuming=lambda line: click.echo(line, err=True),
                early=True,  # a real-time job's first requests leave before Dagster loads
                loaded=settle_startup_objects,
            )
    print_summary(result, ready.spec, ready.price.source)
    print_canary(ready.spec, opts.storage_root)
    return EXIT_CODES[result.status]


def _quiet_drive(ready: Ready) -> Result:
    """One step of a distilled job, run as ``maple enrich`` runs a job."""
    return drive(ready, resuming=lambda line: click.echo(line, err=True))


def print_canary(spec: JobSpec, root: str) -> None:
    """The canary that let the job go on (with ``--canary``)."""
    report = last_canary(JobState(Storage(root), spec.name)) if spec.canary else None
    if report is not None:
        click.echo(
            f"{'canary':<15}{report.succeeded:,} of {report.sample_size:,} rows succeeded "
            f"through {report.sent_via} (run {report.run}; its rows count as reused)"
        )


def print_lines(result: Result) -> None:
    """Every line accounted for: the rows sent answered, failed or missing, and the lines the
    batches' files lacked (resent), repeated or did not ask for (ignored)."""
    click.echo(f"{'lines':<15}{describe(result.lines)}")
    if result.lines_missing:
        click.echo(
            f"  {'missing':<12} {result.lines_missing:,} line(s) absent from ended batches' "
            "output and error files, resent"
            + (f"; {still:,} still missing" if (still := result.lines.get("missing", 0)) else "")
        )
    if result.lines_duplicated:
        click.echo(
            f"  {'duplicated':<12} {result.lines_duplicated:,} line(s) repeated in the output, "
            "each request merged once"
        )
    if result.lines_unknown:
        click.echo(
            f"  {'unknown':<12} {result.lines_unknown:,} line(s) for requests the batch was not "
            "sent, ignored"
        )


def print_summary(
    result: Result, spec: JobSpec | None = None, price_source: str | None = None
) -> None:
    """The run's figures on stdout (``sent``, tokens and cost: this run's own); why it
    stopped, if it did, on stderr. ``price_source``: where the model's price came from (a
    self-hosted model with no price is said to be one)."""
    click.echo("", err=True)
    click.echo(f"{'job':<15}{result.job}")
    for key in ("rows", "succeeded", "failed"):
        click.echo(f"{key:<15}{getattr(result, key):,}")
    for cls, count in sorted(result.failed_by_class.items()):
        click.echo(f"  {cls:<12} {count:,}")
    click.echo(f"{'sent':<15}{result.sent:,}  (by this run)")
    print_lines(result)
    click.echo(
        f"{'reused':<15}{result.reused:,}  (not sent: answered by an earlier run or an "
        "identical row)"
    )
    click.echo(f"{'input tokens':<15}{result.input_tokens:,}")
    caches = spec is None or "cache" in spec.kind.options  # an embedding has no prompt cache
    if caches:
        click.echo(
            f"{'cached tokens':<15}{result.cached_tokens:,}"
            f"{percent(result.cached_tokens, result.input_tokens)} of input read from the "
            f"prompt cache; {result.cache_write_tokens:,} written to it"
        )
    if spec is not None and caches:
        click.echo(f"{'prompt cache':<15}{cache_layout(spec).describe()}")
    click.echo(f"{'output tokens':<15}{result.output_tokens:,}")
    if result.reasoning_tokens:  # a model that reasons (none: nothing to say)
        click.echo(
            f"{'reasoning':<15}{result.reasoning_tokens:,}"
            f"{percent(result.reasoning_tokens, result.output_tokens)} of output spent "
            "reasoning (billed as output)"
        )
    if result.downgraded:  # a priority tier over its limit, a shed flex row (none: no line)
        click.echo(
            f"{'downgraded':<15}{result.downgraded:,}  (served at the standard tier though "
            "another was asked: priority over its limit, or flex shed; billed at the standard "
            "price)"
        )
    unpriced = f"  ({SELF_HOSTED})" if price_source == SELF_HOSTED else ""
    click.echo(f"{'cost USD':<15}{result.cost_usd:.6f}{unpriced}")
    share = percent(result.saved_usd, result.realtime_cost_usd)
    click.echo(f"{'real-time USD':<15}{result.realtime_cost_usd:.6f}")
    click.echo(f"{'saved USD':<15}{result.saved_usd:.6f}{share} vs real-time prices")
    share = percent(result.cache_saved_usd, result.uncached_cost_usd)
    if caches:
        click.echo(
            f"{'cache saved':<15}{result.cache_saved_usd:.6f} USD{share} vs the same tokens "
            "uncached"
        )
    if result.deadline is not None:
        split = result.deadline
        click.echo(f"{'batch rows':<15}{split['batch_rows']:,}")
        click.echo(
            f"{'real-time rows':<15}{split['realtime_rows']:,}  (sent real-time to meet the "
            "deadline)"
        )
        click.echo(
            f"{'deadline USD':<15}{split['deadline_cost_usd']:.6f}  (real-time rows cost "
            f"{split['realtime_cost_usd']:.6f}; this much more than at batch prices)"
        )
        if split.get("priority_rows"):
            click.echo(
                f"{'priority rows':<15}{split['priority_rows']:,}  (of the real-time rows, on "
                f"the priority tier: {split['priority_cost_usd']:.6f} USD, "
                f"{split['priority_premium_usd']:.6f} more than at standard real-time prices)"
            )
    click.echo(f"{'output':<15}{result.output}")
    if result.stopped:
        click.echo(f"stopped: {result.stopped}", err=True)
