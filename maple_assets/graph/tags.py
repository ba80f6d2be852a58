"""Run tags that say what a run is: the enrichment, its team, version, provider and model.

Every run the sensor or ``maple enrich`` launches carries them, so the run list filters by
enrichment (``maple/job``) or team (``maple/team``)."""

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
