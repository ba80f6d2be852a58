"""Run tags that say what a run is: the enrichment, its team, version, provider and model.

Every run the sensor or ``maple enrich`` launches carries them, and a run launched without them
(a click on Materialize, a backfill from the UI) gets them from its first Maple step
(`tag_run`), so the run list filters every run by enrichment (``maple/job``) or team
(``maple/team``)."""

import dagster as dg

from maple_engine.spec import JobSpec
from maple_engine.state import JobState

JOB = "maple/job"
TEAM = "maple/team"
VERSION = "maple/version"
PROVIDER = "maple/provider"
MODEL = "maple/model"


def run_tags(spec: JobSpec, state: JobState | None = None) -> dict[str, str]:
    """The tags of a run of ``spec``; ``maple/version`` once the job has a version."""
    tags = {JOB: spec.name, TEAM: spec.team, PROVIDER: spec.provider, MODEL: spec.model}
    version = state.version() if state is not None else None
    if version is not None:
        tags[VERSION] = str(version.number)
    return tags


def tag_run(context: dg.AssetExecutionContext, spec: JobSpec, state: JobState) -> None:
    """Give the step's run the job's tags it lacks (a run the UI or a backfill launched)."""
    have = context.run.tags
    if JOB in have:
        return
    missing = {k: v for k, v in run_tags(spec, state).items() if k not in have}
    context.instance.add_run_tags(context.run.run_id, missing)
