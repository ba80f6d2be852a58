"""The ``maple`` command line: enrich, status, cancel, costs, emulator."""

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from emulator.cli import emulator_command
from maple_assets.cli.costs import costs_command
from maple_assets.cli.status import cancel_command, status_command
from maple_engine.errors import ConfigError
from maple_engine.memory import tune_allocator
from maple_engine.policy import parse_retry_options
from maple_engine.providers.registry import PROVIDERS
from maple_engine.settings import Settings
from maple_engine.spec import MB, file_format


def parse_params(specs: tuple[str, ...]) -> dict[str, Any]:
    from maple_engine.inputs.preflight import parse_param

    return dict(parse_param(spec) for spec in specs)


@contextlib.contextmanager
def emulator_url(
    provider: str, batch_seconds: float, fail: tuple[str, ...], settings: Settings
) -> Iterator[str | None]:
    """The emulator's URL for ``--provider emulator``: MAPLE_EMULATOR_URL, or one started here."""
    if provider != "emulator":
        yield None
        return
    if settings.emulator_url:
        yield settings.emulator_url
        return
    from emulator.config import EmulatorConfig, parse_fail
    from emulator.server import EmulatorServer

    config = EmulatorConfig(batch_seconds=batch_seconds, fail=parse_fail(list(fail)))
    with EmulatorServer(config) as server:
        yield server.url


@click.group()
@click.version_option(package_name="maple-dagster")
def main() -> None:
    """Maple: run LLM prompts over tables through provider batch APIs, as Dagster assets."""
    tune_allocator()


@main.command("enrich")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--prompt",
    help="Prompt template with {column} placeholders ({column:json} for list/struct columns, "
    "{{ }} for braces).",
)
@click.option(
    "--prompt-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Read the template from a file.",
)
@click.option("--model", required=True, help="Model name, e.g. gpt-4o-mini.")
@click.option("--system", default=None, help="System prompt.")
@click.option("--provider", type=click.Choice(PROVIDERS), default="openai", show_default=True)
@click.option(
    "--output", default=None, help="Output path (.parquet or .csv); default INPUT_enriched.EXT."
)
@click.option("--team", default="default", show_default=True, help="Team the cost is booked to.")
@click.option(
    "--job", "job_name", default=None, help="Job name; rerun with the same name to resume."
)
@click.option(
    "--max-requests-per-batch", type=click.IntRange(min=1), default=50_000, show_default=True
)
@click.option("--max-batch-bytes", type=click.IntRange(min=1), default=200 * MB, show_default=True)
@click.option(
    "--storage",
    default=None,
    help="Storage root (folder or s3://); default MAPLE_STORAGE or ./.maple.",
)
@click.option(
    "--param", "params", multiple=True, help="Model parameter NAME=VALUE (JSON value), repeatable."
)
@click.option(
    "--response-schema",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="JSON schema file: replies are validated and parsed into llm_parsed.",
)
@click.option(
    "--image-column", default=None, help="Column holding an image URL sent with each prompt."
)
@click.option(
    "--retry", "retry_specs", multiple=True, help="Retry policy override CLASS=N|unlimited."
)
@click.option(
    "--no-image-check", is_flag=True, help="Do not check image URLs before retrying invalid_image."
)
@click.option(
    "--poll-interval",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between provider polls.",
)
@click.option(
    "--emulator-batch-seconds",
    type=float,
    default=1.0,
    show_default=True,
    help="With --provider emulator: how long a batch takes.",
)
@click.option(
    "--emulator-fail", multiple=True, help="With --provider emulator: inject CLASS=RATE faults."
)
@click.option(
    "--rpm",
    type=click.IntRange(min=1),
    default=None,
    help="Real-time providers: requests per minute (default: learned from headers).",
)
@click.option(
    "--tpm",
    type=click.IntRange(min=1),
    default=None,
    help="Real-time providers: tokens per minute (default: learned from headers).",
)
@click.option(
    "--max-concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Real-time providers: most requests in flight at once.",
)
@click.option("--quiet", is_flag=True, help="No progress line.")
@click.option(
    "--wait",
    is_flag=True,
    help="If another maple enrich drives this job, wait for it, then print the result "
    "(default: exit at once with code 2, saying where and since when it runs).",
)
@click.option(
    "--timings-json", default=None, help="Write per-stage wall times (JSON) to this file."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan and the estimated tokens and cost; upload and submit nothing.",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=None,
    help="Stop submitting batches before the job's spend (committed + next batch) exceeds "
    "USD; rerun with a larger --budget to continue.",
)
@click.option(
    "--allow-untracked-cost",
    is_flag=True,
    help="Run a model with no known price (its cost is recorded as 0).",
)
@click.option(
    "--no-reuse",
    is_flag=True,
    help="Send every row, even those whose request has a stored answer from an earlier run.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Send again the rows whose stored outcome is a failure, each with a fresh retry budget.",
)
@click.option(
    "--max-enqueued-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="The provider queue's limit for this model (OpenAI: prompt tokens enqueued in "
    "batches); shards wait locally instead of failing. Default: learned from the provider.",
)
@click.option(
    "--priority",
    type=int,
    default=0,
    show_default=True,
    help="Among waiting jobs of the same team on one provider queue, higher goes first.",
)
@click.option(
    "--deadline",
    default=None,
    metavar="DURATION",
    help="e.g. 6h, 90s, 1h30m: rows still in batches when it approaches are cancelled there "
    "and sent through the real-time API (at real-time prices).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks and Dagster's warnings.")
def enrich_command(
    input_path: str, prompt: str | None, prompt_file: str | None, **options: Any
) -> None:
    """Enrich INPUT (CSV or Parquet, local or s3://) with one model reply per row.

    Exit codes: 0 every row succeeded; 3 the job finished but some rows failed; 4 the job
    stopped early (budget, quota, cancel, max age); 2 usage or validation error (nothing was
    uploaded); 1 anything unexpected; 130 interrupted (rerun the same command to resume).
    """
    from maple_assets.cli.enrich import EnrichOptions, run_enrich
    from maple_assets.cli.errors import quiet_interrupts, reported

    if (prompt is None) == (prompt_file is None):
        raise click.UsageError("Give exactly one of --prompt or --prompt-file.")
    debug = bool(options.get("debug"))
    with quiet_interrupts(debug), reported(debug):
        template = prompt if prompt is not None else read_prompt_file(str(prompt_file))
        file_format(input_path)
        settings = Settings.load(storage=options.pop("storage"))
        opts = EnrichOptions(
            input_path=input_path,
            prompt=template,
            params=parse_params(options.pop("params")),
            retries=parse_retry_options(list(options.pop("retry_specs"))),
            storage=settings.storage_root,
            **options,
        )
        emulator = emulator_url(
            opts.provider, opts.emulator_batch_seconds, opts.emulator_fail, settings
        )
        with emulator as url:
            code = run_enrich(opts, url)
    sys.exit(code)


def read_prompt_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--prompt-file {path}: not UTF-8 text ({exc.reason}).") from exc


main.add_command(costs_command)
main.add_command(status_command)
main.add_command(cancel_command)
main.add_command(emulator_command)
