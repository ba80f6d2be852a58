"""Every job option is defined once, in ``JobSpec``: ``maple enrich``'s options, the
``enrichment()`` and ``embedding()`` keywords and ``input_shards``' run config agree with it
(name, default, help, bounds), and the providers' file limits are spelled in one place."""

import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest

from maple_assets.api.options import CommandOptions
from maple_assets.cli.commands import enrich_command
from maple_assets.cli.options import flag_name
from maple_assets.factory import embedding, enrichment
from maple_assets.graph.assets import InputShardsConfig
from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING, Kind
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
    "--debug", "--header", "--extra-body",
]  # fmt: skip

# Options whose flag the command writes itself (the spec reads what they give: ``JobSpec``'s
# validators parse repeatable NAME=VALUE, a duration, a schema file). ``source`` is the INPUT
# argument.
PARSED = {
    "name": "--job",  # default None: a name derived from the input and the fingerprint
    "prompt": "--prompt",  # or --prompt-file: exactly one is required
    "params": "--param",
    "retries": "--retry",
    "headers": "--header",  # repeatable NAME: VALUE
    "extra_body": "--extra-body",  # repeatable KEY=JSON
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


# ``enrichment()`` and ``embedding()``: one factory per kind, whose keywords are the job options
# of its kind (``job_options``) by name, each with the field's default. The exceptions, and why:
FACTORIES = {CHAT: enrichment, EMBEDDING: embedding}
NOT_JOB_OPTIONS = {
    "poll_interval_s": "the sensor's minimum interval, not the job's",
    "group": "the assets' group in Dagster",
    "key_prefix": "the path before the assets' keys in Dagster",
    "blocking": "whether merged's failed_rows check blocks its downstream assets",
}
POSITIONAL = {
    "name": "required (the spec's too): the job's name",
    "source": "required: an upstream asset or a path (the spec holds a path, None for an asset)",
    "template": "required: the kind's template (prompt, text), which the spec needs of the kind",
    "model": "required (the spec's too)",
}
EMPTY_AS_NONE = {
    "params",
    "retries",
    "headers",
    "extra_body",
    "file_columns",
}  # None for none; the spec reads it as its default, {} (or [])
BY_ALIAS = {"deadline_s"}  # ``deadline=`` ("6h", seconds, a timedelta), the spec's alias


@pytest.mark.parametrize("kind", list(FACTORIES), ids=str)
def test_factory_keywords_are_the_job_options_with_their_defaults(kind: Kind) -> None:
    parameters = inspect.signature(FACTORIES[kind]).parameters
    keywords = {FIELD_OF.get(k, k): p for k, p in parameters.items() if k not in NOT_JOB_OPTIONS}
    assert set(keywords) == set(job_options(kind))  # every option of the kind, no other
    assert {FIELD_OF[k] for k in parameters if k in FIELD_OF} == BY_ALIAS
    positional = [k for k, p in parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    template = kind.template_field
    assert positional == [template if k == "template" else k for k in POSITIONAL]
    for field, parameter in keywords.items():
        if field in positional:
            assert parameter.default is parameter.empty, field
            continue
        assert parameter.kind is parameter.KEYWORD_ONLY, field
        default = getattr(DEFAULTS, field)
        if field in EMPTY_AS_NONE:
            read = build_spec(name="j", prompt="{t}", model="m", **{field: parameter.default})
            assert parameter.default is None and getattr(read, field) == default, field
        else:
            assert parameter.default == default, field


def test_factory_keywords_reach_the_spec_as_given(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    source.write_bytes(b"")
    en = embedding(
        "vectors", str(source), "{title}", "text-embedding-3-small", dimensions=8,
        deadline="1h30m", retries={"server_error": "unlimited"}, params=None, budget_usd=2.5,
        provider="emulator",
    )  # fmt: skip
    spec = en.spec
    assert (spec.kind, spec.text, spec.dimensions, spec.source) == (
        EMBEDDING, "{title}", 8, str(source),
    )  # fmt: skip
    assert (spec.deadline_s, spec.retries, spec.params, spec.budget_usd) == (
        5400.0, {"server_error": -1}, {}, 2.5,
    )  # fmt: skip


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


@pytest.mark.parametrize(("deadline", "seconds"), [("8s", 60), ("90s", 90), ("6h", 6 * 3600)])
def test_merged_is_overdue_after_the_deadline_or_a_minute_at_least(
    deadline: str, seconds: int, tmp_path: Path
) -> None:
    """Dagster refuses a freshness window under a minute; a deadline of seconds still loads."""
    import dagster as dg

    source = tmp_path / "in.csv"
    source.write_text("t\na\n")
    en = enrichment("fresh", str(source), "{t}", "gpt-4o-mini", deadline=deadline)
    specs = [s for a in en.assets if isinstance(a, dg.AssetsDefinition) for s in a.specs]
    policy = next(s for s in specs if s.key == en.merged_key).freshness_policy
    assert policy is not None
    assert policy.fail_window.to_timedelta().total_seconds() == seconds  # type: ignore[attr-defined]
