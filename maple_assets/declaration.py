"""A job's spec and retry policy from the keywords of ``enrichment()`` or ``embedding()``,
checked, without Dagster: ``maple enrich`` checks a job (and may start sending it) before
Dagster is imported, and ``maple_assets.factory`` builds the asset graph of the same spec."""

import dataclasses
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import check_declaration
from maple_engine.policy import RetryPolicy, job_policy
from maple_engine.providers.registry import capabilities, one_of
from maple_engine.spec import (
    JobSpec,
    build_spec,
    check_queue_options,
    validate_name,
    validate_paths,
)


@dataclasses.dataclass(frozen=True)
class Declared:
    """A checked job: its spec and its retry policy."""

    spec: JobSpec
    policy: RetryPolicy


def schema_dict(response_schema: Any) -> dict[str, Any] | None:
    """A JSON schema from a dict or a pydantic model class."""
    if response_schema is None or isinstance(response_schema, dict):
        return response_schema
    return dict(response_schema.model_json_schema())


def declare_job(source: Any, **options: Any) -> Declared:
    """The job of ``options`` (job options by name, ``deadline`` as given, a response schema
    as a dict) over ``source``: a path, or an upstream asset (no source in the spec)."""
    options["params"] = dict(options["params"] or {})
    options["retries"] = dict(options["retries"] or {})
    validate_name(options["name"])
    deadline = options.pop("deadline")
    queue_options = check_queue_options(
        options.pop("max_enqueued_tokens"), options.pop("priority"), deadline
    )
    spec = build_spec(
        source=source if isinstance(source, str) else None, **options, **queue_options
    )
    validate_paths(spec)
    check_declaration(spec)
    check_deadline(spec)
    return Declared(spec, job_policy(spec.retries, spec.params, spec.check_images))


def check_deadline(spec: JobSpec) -> None:
    """A deadline needs a real-time API to fall back on (a real-time provider is one)."""
    able = capabilities(spec.provider)
    if spec.deadline_s is not None and able.mode == "batch" and able.realtime_twin is None:
        raise ConfigError(
            f"deadline= needs a real-time API to fall back on, and {spec.provider} has none "
            f"here: drop the deadline or use {one_of(lambda c: c.realtime_twin is not None)}."
        )
