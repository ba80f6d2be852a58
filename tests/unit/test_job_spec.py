"""Every job option is defined once, in ``JobSpec``: ``maple enrich``'s options, the
``enrichment()`` keywords and ``input_shards``' run config agree with it (name, default, help,
bounds), and the providers' file limits are spelled in one place."""

import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest

from maple_assets.api.options import CommandOptions
from maple_assets.cli.commands import enrich_command
from maple_assets.cli.options import flag_name
from maple_assets.factory import enrichment
from maple_assets.graph.assets import InputShardsConfig
from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.spec import ALIASES, DEFAULTS, JobSpec, build_spec, job_options, option_help

ROOT = Path(__file__).resolve().parents[2]

# Every flag ``maple enrich`` has had: the command-line contract.
FLAGS = [
    "--prompt", "--prompt-file", "--model", "--system", "--provider", "--output", "--team",
    "--job", "--max-requests-per-batch", "--max-batch-bytes", "--storage", "--param",
    "--response-schema", "--image-column", "--retry", "--no-image-check", "--poll-interval",
    "--emulator-batch-seconds", "--emulator-fail", "--rpm", "--tpm", "--max-concurrency",
    "--quiet", "--wait", "--timings-json", "--dry-run", "--budget", "--allow-untracked-cost",
    "--no-reuse", "--retry-failed", "--max-enqueued-tokens", "--priority", "--deadline",
    "--debug",
]  # fmt: skip

# Options whose flag the command writes itself (the spec reads what they give: ``JobSpec``'s
# validators parse repeatable NAME=VALUE, a duration, a schema file). ``source`` is the INPUT
# argument.
PARSED = {
    "name": "--job",  # default None: a name derived from the input and the fingerprint
    "prompt": "--prompt",  # or --prompt-file: exactly one is required
    "params": "--param",
    "retries": "--retry",
    "response_schema": "--response-schema",  # a file; the field holds its JSON
    "deadline_s": "--deadline",  # a duration, "6h"
}
REQUIRED_ON_CLI = {"model"}
FIELD_OF = {alias: field for field, alias in ALIASES.items()}  # a keyword -> its JobSpec field


def cli_options() -> dict[str, click.Parameter]:
    return {opt: p for p in enrich_command.params for opt in getattr(p, "opts", [])}


def cli_default(option: click.Parameter) -> Any:
    """The value the command gets when the option is not given."""
    context = click.Context(enrich_command)
    return option.process_value(context, option.get_default(context))


def test_every_flag_is_still_there() -> None:
    help_text = click.testing.CliRunner().invoke(enrich_command, ["--help"]).output
    missing = [flag for flag in FLAGS if flag not in cli_options()]
    assert missing == []
    assert all(flag in help_text for flag in FLAGS)


CHAT_OPTIONS = job_options(CHAT)


@pytest.mark.parametrize("field", sorted(set(CHAT_OPTIONS) - {"source"}))
def test_each_job_option_is_a_flag_with_the_fields_default_and_help(field: str) -> None:
    info = JobSpec.model_fields[field]
    flag = PARSED.get(field) or flag_name(field, info)
    option = cli_options()[flag]
    assert option.name == field
    assert option.help == info.description
    if field in REQUIRED_ON_CLI:
        assert option.required and info.is_required()
    elif field not in ("name", "prompt"):  # the spec reads the flag's default as its own
        spec = build_spec(name="j", prompt="{t}", model="m", **{field: cli_default(option)})
        assert getattr(spec, field) == getattr(DEFAULTS, field)


def test_the_input_argument_is_the_source() -> None:
    argument = next(p for p in enrich_command.params if isinstance(p, click.Argument))
    assert argument.name == "input_path" and argument.required
    assert DEFAULTS.source is None  # enrichment() takes an asset instead


@pytest.mark.parametrize(
    "field",
    [f for f in CHAT_OPTIONS if JobSpec.model_fields[f].metadata and f not in PARSED],
)
def test_bounds_are_the_fields(field: str) -> None:
    option = cli_options()[flag_name(field, JobSpec.model_fields[field])]
    assert isinstance(option.type, (click.IntRange, click.FloatRange))
    bound = JobSpec.model_fields[field].metadata[0]
    assert option.type.min == getattr(bound, "ge", getattr(bound, "gt", None))


NOT_JOB_OPTIONS = {"poll_interval_s"}  # the Dagster sensor's interval


def test_enrichment_keywords_are_the_job_options() -> None:
    keywords = dict(inspect.signature(enrichment).parameters)
    for name in NOT_JOB_OPTIONS:
        keywords.pop(name)
    fields = {FIELD_OF.get(k, k): p.default for k, p in keywords.items()}
    assert set(fields) == set(CHAT_OPTIONS)
    for field, default in fields.items():
        if JobSpec.model_fields[field].is_required() or field == "prompt":
            assert default is inspect.Parameter.empty, field
        elif field != "source":
            assert (default or type(getattr(DEFAULTS, field))()) == getattr(DEFAULTS, field)


@pytest.mark.parametrize("field", sorted(CommandOptions.model_fields))
def test_each_command_option_is_a_flag_with_the_fields_default_and_help(field: str) -> None:
    info = CommandOptions.model_fields[field]
    option = cli_options()[flag_name(field, info)]
    assert option.help == info.description
    assert cli_default(option) == info.default


def test_input_shards_run_config_is_the_job_options() -> None:
    fields = InputShardsConfig.model_fields
    assert fields["no_reuse"].default is not DEFAULTS.reuse
    assert fields["no_reuse"].description == option_help("reuse")
    retry_failed = cli_options()["--retry-failed"]
    assert cli_default(retry_failed) == fields["retry_failed"].default
    assert retry_failed.help == fields["retry_failed"].description


LIMIT = re.compile(r"\b50_?000\b|\b200_?000_?000\b|\b200 \* MB\b")
ONE_PLACE = ROOT / "maple_engine" / "providers" / "base.py"
NOT_A_LIMIT = {"BLOCK_ROWS = 50_000"}  # rows read at a time from an input file


def test_provider_file_limits_are_spelled_once() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for folder in ("maple_engine", "maple_assets", "resources", "partitions")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ONE_PLACE
        for line in path.read_text(encoding="utf-8").splitlines()
        if LIMIT.search(line) and not any(ok in line for ok in NOT_A_LIMIT)
    ]
    assert found == []
    assert len(LIMIT.findall(ONE_PLACE.read_text(encoding="utf-8"))) == 2


def test_out_of_bounds_values_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"max_batch_bytes=0: .*greater than or equal to 1"):
        enrichment("j", "in.csv", "{t}", "gpt-4o-mini", max_batch_bytes=0)


def test_a_job_kind_takes_its_own_template_and_options() -> None:
    from maple_engine.spec import build_spec

    embed = build_spec(name="e", kind="embedding", text="{title}", model="m", dimensions=8)
    assert embed.template == "{title}" and embed.kind == EMBEDDING
    chat = build_spec(name="e", prompt="{title}", model="m")
    assert chat.fingerprint() != build_spec(name="e", prompt="{title}", model="m2").fingerprint()
    refused = {
        "an embedding job needs a text template": {"kind": "embedding"},
        "the text template is empty": {"kind": "embedding", "text": " "},
        "prompt do(es) not apply to an embedding job": {
            "kind": "embedding",
            "text": "{t}",
            "prompt": "{t}",
        },
        "dimensions do(es) not apply to a chat job": {"prompt": "{t}", "dimensions": 8},
        "a chat job needs a prompt template": {},
    }
    for message, fields in refused.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            build_spec(name="e", model="m", **fields)
    assert "dimensions" in job_options(EMBEDDING)
    assert "prompt" not in job_options(EMBEDDING)
