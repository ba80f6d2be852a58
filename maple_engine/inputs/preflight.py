"""Pre-flight: every check that can fail before the first byte is uploaded.

Two stages. ``check_declaration`` needs no I/O and runs in ``enrichment()`` (so definitions
load without touching storage): the provider serves the job's kind, the response schema fits the
provider, the queue limit fits a request (the job name, the retry policy and the model
parameters are checked by the spec's own validators, ``maple_engine.spec``). ``preflight`` runs
in ``maple enrich`` before the job starts: the input is readable and its columns fit the
template and the output format, every location (input, output, storage root; local or S3)
is reachable and writable with the credentials in use, and an S3 store honours what Maple
relies on (`maple_engine.storage.store_features`).
``input_shards`` repeats the input checks on the first block (``maple_engine.inputs.checks``),
and checks every row against the model's context window, before any shard is submitted.
"""

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.api_params import check_api_params
from maple_engine.inputs.checks import check_input_schema
from maple_engine.inputs.files import provider_files
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.inputs.sources import input_schema
from maple_engine.inputs.templates import parse_template, template_columns
from maple_engine.inputs.tokens import prompt_tokens_expr
from maple_engine.model import FILE_TOKENS
from maple_engine.providers.base import ModelFamily
from maple_engine.providers.registry import capabilities, known_capabilities, one_of
from maple_engine.spec import JobSpec
from maple_engine.storage.exclusive import CreateLocks
from maple_engine.storage.probe import check_readable, check_store, check_writable

FORMAT_NAMES = {"parquet": "Parquet", "csv": "CSV"}
ANSWER_TYPES = {"text": "reply's text", "vector": "fixed-size float32 list"}  # ``Kind.answer``


def check_declaration(spec: JobSpec, schema_source: str = "response_schema") -> None:
    """The checks on the job's settings alone (no I/O)."""
    check_kind(spec)
    if spec.file_columns:
        provider_files(spec)
    check_api_params(spec)
    check_response_schema(spec.response_schema, spec.provider, schema_source)
    check_queue_limit(spec)


def check_queue_limit(spec: JobSpec) -> None:
    """A ``max_enqueued_tokens`` below the smallest request this job can make (its template
    and system prompt with every column empty) could never enqueue a batch, however small."""
    limit, able = spec.max_enqueued_tokens, known_capabilities(spec.provider)
    if limit is None or able is None or able.mode != "batch":
        return
    columns = template_columns(parse_template(spec.template))
    empty = pl.DataFrame({c: [""] for c in columns}) if columns else pl.DataFrame({"_": [""]})
    empty = empty.with_columns(pl.lit(0, pl.Int64).alias(FILE_TOKENS))  # files' least: none
    least = int(empty.select(prompt_tokens_expr(spec, spec.provider)).item())
    if least > limit:
        raise ConfigError(
            f"--max-enqueued-tokens {limit:,} is below the smallest request of this job (about "
            f"{least:,} prompt tokens: the template and system prompt alone), so no batch could "
            "ever be enqueued: give the provider queue's limit for your tier (e.g. 2000000), "
            "or leave it unset to learn it."
        )


def check_kind(spec: JobSpec) -> None:
    """The provider serves the job's kind of request, and the model is of that kind with the
    vector length asked in its documented bounds; the output can hold its answers (an
    embedding's vectors need Parquet)."""
    kind, able = spec.kind, capabilities(spec.provider)
    if kind not in able.kinds:
        raise ConfigError(
            f"Provider {spec.provider!r} does not serve {kind.name} requests here: use "
            f"{one_of(lambda c: kind in c.kinds)}."
        )
    check_model_kind(spec, able.model_family(spec.model), able.models)
    if spec.output_format() not in kind.output_formats:
        formats = " or ".join(FORMAT_NAMES[f] for f in kind.output_formats)
        raise ConfigError(
            f"The output of {kind.job} ({spec.output or 'the default output'}) must be "
            f"{formats}: {kind.output_column} holds a {ANSWER_TYPES[kind.answer]} per row, "
            f"which {FORMAT_NAMES[spec.output_format()]} cannot hold "
            f"(--output NAME.{kind.output_formats[0]})."
        )


def check_model_kind(
    spec: JobSpec, family: ModelFamily | None, families: tuple[ModelFamily, ...]
) -> None:
    """A model of a family the provider documents answers the job's kind, and its vectors are
    as long as the job asks (a model of no listed family is not checked)."""
    if family is None:
        return
    kind = spec.kind
    if family.kind != kind:
        named = (f.part for f in families if f.kind == kind and f.part[-1] not in "-.")
        other = next(named, None)  # a whole model name, not a family's prefix
        example = f" (e.g. {other})" if other else ""
        article = "an" if family.kind.name[0] in "aeiou" else "a"
        wanted = "an" if kind.name[0] in "aeiou" else "a"
        raise ConfigError(
            f"--model {spec.model} is {article} {family.kind.name} model, and {kind.job} sends "
            f"{kind.name} requests: give {wanted} {kind.name} model{example}, or run "
            f"`maple {family.kind.command}` for this model."
        )
    dims = spec.dimensions
    if dims is None:
        return
    if not family.shortens:
        raise ConfigError(
            f"--model {spec.model} makes vectors of one length only and takes no "
            f"--dimensions: drop --dimensions {dims}, or use a model that shortens its vectors."
        )
    if family.max_dimensions is not None and dims > family.max_dimensions:
        raise ConfigError(
            f"--dimensions {dims:,} is more than {spec.model} makes (at most "
            f"{family.max_dimensions:,} values): give --dimensions 1 to {family.max_dimensions:,}."
        )


def preflight(spec: JobSpec, storage_root: str, locks: CreateLocks | None = None) -> str | None:
    """The checks on the job's input and locations, before anything is written or uploaded;
    an ``s3://`` root's store is probed (``locks``: where the exclusive creates it cannot make
    may be kept, and then the line saying so is returned)."""
    if spec.source is not None:
        check_readable(spec.source, "The input")
        check_input_schema(input_schema(spec.source), spec)
    if spec.output is not None:
        check_writable(spec.output, "--output", folder=False)
    check_writable(storage_root, "The storage root", folder=True)
    return check_store(storage_root, "The storage root", locks=locks)
