"""The ``maple`` command line: enrich, embed, status, cancel, costs, emulator, dev, providers,
webhooks."""

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from emulator.cli import emulator_command
from maple_assets.api.options import CommandOptions
from maple_assets.cli.options import flag_name, model_options
from maple_assets.graph.shard_options import ShardRunOptions
from maple_engine.errors import ConfigError
from maple_engine.memory import settle_startup_objects, tune_allocator
from maple_engine.model import CHAT, EMBEDDING, Kind
from maple_engine.providers.registry import names
from maple_engine.settings import Settings
from maple_engine.spec import JobSpec, file_format, job_options, option_help

# Commands loaded when run (or listed): ``maple enrich`` then imports neither them nor Dagster
# before its first request.
LAZY_COMMANDS = {
    "costs": "maple_assets.cli.costs:costs_command",
    "stats": "maple_assets.cli.stats:stats_command",
    "reconcile": "maple_assets.cli.reconcile:reconcile_command",
    "status": "maple_assets.cli.status:status_command",
    "cancel": "maple_assets.cli.status:cancel_command",
    "dev": "maple_assets.cli.dev:dev_command",
    "providers": "maple_assets.cli.providers:providers_command",
    "webhooks": "maple_assets.cli.webhooks:webhooks_command",
}


class _Reported(click.Group):
    """Every command ends the same way: one line on stderr and an exit code from the README's
    table, whatever escapes it (``enrich --debug`` adds the traceback itself). The commands of
    ``LAZY_COMMANDS`` load on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module, _, name = LAZY_COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), name)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        from maple_assets.cli import startup_done
        from maple_assets.cli.errors import quiet_interrupts, reported

        startup_done()  # loaded: Ctrl-C is this handling's from here on
        with quiet_interrupts(debug=False), reported(debug=False):
            return super().invoke(ctx)


@click.group(cls=_Reported)
@click.version_option(package_name="maple-dagster")
def main() -> None:
    """Maple: run LLM prompts over tables through provider batch APIs, as Dagster assets."""
    tune_allocator()
    if click.get_current_context().invoked_subcommand not in JOB_COMMANDS:
        settle_startup_objects()  # a job settles once Dagster has loaded (``run_enrich``)


JOB_COMMANDS = ("enrich", "embed")


# Job options whose flag is written here, the spec reading what it gives (a name or none, a
# template, a path, repeatable NAME=VALUE, a duration); their help is the field's and a test
# holds them to ``JobSpec``. Every other ``JobSpec`` field is generated.
PARSED_HERE = (
    "name",
    "prompt",
    "text",
    "source",
    "params",
    "response_schema",
    "retries",
    "headers",
    "extra_body",
    "deadline_s",
)
F = TypeVar("F", bound=Callable[..., Any])


def job_flags(kind: Kind) -> Callable[[F], F]:
    """The options every job command takes: the job options of ``kind`` and the command's."""
    decorators = [
        model_options(
            JobSpec,
            [f for f in job_options(kind) if f not in PARSED_HERE],
            {"provider": click.Choice(names(lambda c: kind in c.kinds))},
        ),
        click.option(_flag("name"), "name", default=None, help=option_help("name")),
        click.option("--param", "params", multiple=True, help=option_help("params")),
        click.option("--retry", "retries", multiple=True, help=option_help("retries")),
        click.option(
            "--header",
            "headers",
            multiple=True,
            metavar="'NAME: VALUE'",
            help=option_help("headers"),
        ),
        click.option(
            "--extra-body",
            "extra_body",
            multiple=True,
            metavar="KEY=JSON",
            help=option_help("extra_body"),
        ),
        click.option(
            _flag("deadline_s"),
            "deadline_s",
            default=None,
            metavar="DURATION",
            help=option_help("deadline_s"),
        ),
        model_options(ShardRunOptions, ["retry_failed"]),
        model_options(CommandOptions),
    ]

    def decorate(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return decorate


def _flag(field: str) -> str:
    return flag_name(field, JobSpec.model_fields[field])


@main.command("enrich")
@click.argument("input_path", metavar="INPUT")
@click.option("--prompt", help=option_help("prompt"))
@click.option(
    "--prompt-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Read the template from a file.",
)
@click.option(
    "--response-schema",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help=option_help("response_schema"),
)
@job_flags(CHAT)
def enrich_command(
    input_path: str, prompt: str | None, prompt_file: str | None, **options: Any
) -> None:
    """Enrich INPUT (CSV or Parquet, local or s3://) with one model reply per row.

    Exit codes: 0 every row succeeded; 3 the job finished but some rows failed; 4 the job
    stopped early (budget, quota, cancel, max age); 2 usage or validation error (nothing was
    uploaded); 1 anything unexpected; 130 interrupted (rerun the same command to resume).
    """
    if (prompt is None) == (prompt_file is None):
        raise click.UsageError("Give exactly one of --prompt or --prompt-file.")
    run_job(input_path, options, lambda: {"prompt": prompt_of(prompt, prompt_file)})


@main.command("embed")
@click.argument("input_path", metavar="INPUT")
@click.option("--text", required=True, metavar="TEMPLATE", help=option_help("text"))
@job_flags(EMBEDDING)
def embed_command(input_path: str, text: str, **options: Any) -> None:
    """Embed INPUT (CSV or Parquet, local or s3://): one vector per row, in llm_embedding
    (Parquet output). Rows whose text is empty are not sent (llm_failure_class empty_text).

    Exit codes: as for maple enrich.
    """
    run_job(input_path, options, lambda: {"kind": EMBEDDING, "text": text})


def run_job(
    input_path: str, options: dict[str, Any], templates: Callable[[], dict[str, Any]]
) -> None:
    """Run one job command: check the input, start the emulator if asked, drive the job."""
    from maple_assets.api.driver import job_spec
    from maple_assets.api.options import EnrichOptions
    from maple_assets.cli.enrich import run_enrich
    from maple_assets.cli.errors import quiet_interrupts, reported

    debug = bool(options.get("debug"))
    with quiet_interrupts(debug), reported(debug):
        given = templates()
        file_format(input_path)
        settings = Settings.load(storage=options["storage"])
        job = {f: options.pop(f) for f in JobSpec.model_fields if f in options}
        spec = job_spec(input_path, **job, **given)  # an embedding when ``given`` says so
        opts = EnrichOptions(spec=spec, storage_root=settings.storage_root, **options)
        code = run_enrich(opts, settings)
    sys.exit(code)


def prompt_of(prompt: str | None, prompt_file: str | None) -> str:
    return prompt if prompt is not None else read_prompt_file(str(prompt_file))


def read_prompt_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--prompt-file {path}: not UTF-8 text ({exc.reason}).") from exc


main.add_command(emulator_command)
