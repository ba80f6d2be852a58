"""A job's spec, checked, and its retry policy, without Dagster: ``maple enrich`` checks a job
(and may start sending it) before Dagster is imported, and ``maple_assets.factory`` builds the
asset graph of the same spec."""

import dataclasses

from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import check_declaration
from maple_engine.policy import RetryPolicy, job_policy
from maple_engine.providers.registry import capabilities, one_of
from maple_engine.spec import JobSpec, validate_paths


@dataclasses.dataclass(frozen=True)
class Declared:
    """A checked job: its spec and its retry policy."""

    spec: JobSpec
    policy: RetryPolicy


def declare_job(spec: JobSpec) -> Declared:
    """The checks a job passes beyond its spec's own (which ran as it was built): its paths,
    its provider's support for it, its deadline; and its retry policy."""
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
