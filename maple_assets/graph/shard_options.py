"""The run options of ``input_shards``, without Dagster: ``InputShardsConfig`` (the launchpad's
config) takes its fields from here, and ``maple enrich`` its ``--retry-failed`` flag, so the
command line is built before Dagster is imported."""

from pydantic import BaseModel, Field

from maple_engine.spec import DEFAULTS, option_help


class ShardRunOptions(BaseModel):
    """``retry_failed`` sends failed rows again; ``no_reuse`` turns off the job option ``reuse``
    for one run."""

    retry_failed: bool = Field(
        default=False,
        description="Send again the rows whose stored outcome is a failure, each with a fresh "
        "retry budget (otherwise a failed row stays failed until its request changes).",
    )
    no_reuse: bool = Field(default=not DEFAULTS.reuse, description=option_help("reuse"))
