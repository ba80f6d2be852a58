"""``maple_job``: applications run ad-hoc jobs through Dagster's own API.

A generic job with one op, ``enrich``, whose config is the job spec (``JobSpec``'s fields, with
``input`` for ``source`` and ``job`` for ``name``) plus ``retry_failed``, ``wait`` and
``poll_interval``. Launch it over GraphQL (``DagsterGraphQLClient.submit_job_execution(
"maple_job", run_config={"ops": {"enrich": {"config": {...}}}})``): the run drives the job to
its end on whatever run worker the deployment's launcher gives it, through the same driver as
``maple enrich`` (driver lease, claims, response store, ledger), so two runs of one ``job`` name
pay once. The run is tagged ``maple/job`` (and team, provider, model, ``maple/status``), its
figures are the op output's metadata; a spec that cannot start fails the run at once with the
CLI's one-line error (also the ``maple/error`` tag), nothing uploaded. The job's stage runs
happen inside this run on a private in-memory instance: the deployment's Runs page and Catalog
hold this run, not the ad-hoc job's assets and stage runs.
"""

import types
from typing import Any, Literal, Union, get_args, get_origin

import dagster as dg
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from maple_assets.api.distill import drive_job
from maple_assets.api.driver import drive, emulator_url, prepare
from maple_assets.api.errors import UsageError, one_line, typed_usage_errors
from maple_assets.api.jobs import enrich_options
from maple_assets.api.options import CommandOptions
from maple_assets.graph.assets import InputShardsConfig
from maple_assets.graph.tags import run_tags
from maple_engine.model import Kind
from maple_engine.settings import Settings
from maple_engine.spec import ALIASES, JobSpec

# The config names the job and its input by their aliases (``job``, ``input``), every other job
# option by its field's name; ``JobSpec`` takes either.
CONFIG_KEYS = {field: ALIASES[field] for field in ("name", "source")}
RUN_FIELDS: dict[str, type[BaseModel]] = {
    "retry_failed": InputShardsConfig,
    "wait": CommandOptions,
    "base_url": CommandOptions,
    "completion_window": CommandOptions,
}
RUN_DEFAULTS = {"wait": True}  # a second run of a job waits for the first, then reuses it
STATUS, ERROR = "maple/status", "maple/error"

_SCALARS = {str: dg.String, int: dg.Int, float: dg.Float, bool: dg.Bool}


def config_type(annotation: Any) -> Any:
    """A pydantic annotation as a Dagster config type (a dict is a permissive mapping)."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return dg.Noneable(config_type(inner[0]))
    if get_origin(annotation) is Literal:  # one of a few words: JobSpec says which are valid
        annotation = type(get_args(annotation)[0])
    if annotation is Kind:
        annotation = str  # its name; JobSpec says which are valid
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if get_origin(annotation) is list:  # columns: --file-column
        return dg.Array(config_type(get_args(annotation)[0]))
    if get_args(annotation) == (str, str):  # headers: a value may be {"env": "VAR"}, a secret
        return dg.Map(str, dg.StringSource)  # type: ignore[no-untyped-call]
    if annotation is dict or get_origin(annotation) is dict:
        return dg.Permissive()  # type: ignore[no-untyped-call]
    raise TypeError(f"no Dagster config type for {annotation!r}")


def config_field(info: FieldInfo, default: Any = None) -> dg.Field:
    """One pydantic field as a Dagster config field: its type, default and help."""
    kind = config_type(info.annotation)
    if info.is_required():
        return dg.Field(kind, description=info.description)
    value = default if default is not None else info.get_default(call_default_factory=True)
    value = value.name if isinstance(value, Kind) else value
    return dg.Field(kind, default_value=value, is_required=False, description=info.description)


def enrich_config_schema() -> dict[str, dg.Field]:
    """The ``enrich`` op's config: every ``JobSpec`` field, and the run options."""
    schema = {
        CONFIG_KEYS.get(name, name): config_field(info)
        for name, info in JobSpec.model_fields.items()
    }
    schema[CONFIG_KEYS["source"]] = dg.Field(
        dg.String, description=JobSpec.model_fields["source"].description
    )
    for name, model in RUN_FIELDS.items():
        schema[name] = config_field(model.model_fields[name], RUN_DEFAULTS.get(name))
    return schema


def maple_job(name: str = "maple_job") -> dg.JobDefinition:
    """The generic ad-hoc enrichment job; add it to a code location's ``Definitions(jobs=...)``
    (it needs no resources: the run wires its own from the code location's settings)."""

    @dg.op(
        name="enrich",
        config_schema=enrich_config_schema(),
        out=dg.Out(dg.Nothing),
        description="Run one enrichment job to its end, as `maple enrich` does.",
    )
    def enrich_op(context: dg.OpExecutionContext) -> dg.Output[None]:
        return run_from_config(context, dict(context.op_config))

    @dg.job(name=name, description=__doc__.split("\n\n")[1].replace("\n", " "))
    def job() -> None:
        enrich_op()

    return job


def run_from_config(context: dg.OpExecutionContext, config: dict[str, Any]) -> dg.Output[None]:
    """Check the job (a ``UsageError`` fails the run at once), run it, report its figures."""
    instance, run_id = context.instance, context.run_id
    try:
        with typed_usage_errors():
            opts = enrich_options(config.pop(CONFIG_KEYS["source"]), **config)
            settings = Settings.load(storage=opts.storage_root)
            with emulator_url(opts, settings) as url:
                ready = prepare(opts, url)
                instance.add_run_tags(run_id, run_tags(ready.enrichment.spec))
                # the job's own stage runs go to a private in-memory instance: in the
                # deployment's they were unowned assets in the Catalog and untargeted runs
                # (this run, its tags and figures are what the deployment shows)
                stages = dg.DagsterInstance.ephemeral()
                result = drive_job(ready, url, lambda step: drive(step, stages, driver="dagster"))
    except UsageError as exc:  # the CLI's one line, and no traceback
        line = one_line(exc)
        instance.add_run_tags(run_id, {ERROR: line[:4000]})
        raise dg.Failure(description=line, allow_retries=False) from None
    instance.add_run_tags(run_id, {STATUS: result.status})
    metadata = result.metadata()
    if result.status == "stopped":
        raise dg.Failure(
            description=f"stopped: {result.stopped}", metadata=metadata, allow_retries=False
        )
    return dg.Output(None, metadata=metadata)
