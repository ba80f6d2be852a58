"""The options of one job command (``maple enrich``, ``maple embed``, ``maple_assets.enrich``)
beside the job's own: where and how this command drives the job. Dagster-free, so the command
line is built before Dagster is imported."""

from pydantic import BaseModel, Field

from maple_engine.spec import JobSpec


class CommandOptions(BaseModel):
    """The options of ``maple enrich`` that are not the job's (those are ``JobSpec``'s): where
    and how this command drives the job."""

    storage: str | None = Field(
        default=None,
        description="Storage root (folder or s3://); default MAPLE_STORAGE or ./.maple.",
    )
    poll_interval: float = Field(default=2.0, description="Seconds between provider polls.")
    emulator_batch_seconds: float = Field(
        default=1.0, description="With --provider emulator: how long a batch takes."
    )
    emulator_fail: tuple[str, ...] = Field(
        default=(), description="With --provider emulator: inject CLASS=RATE faults."
    )
    rpm: int | None = Field(
        default=None,
        ge=1,
        description="Real-time providers: requests per minute (default: learned from headers).",
    )
    tpm: int | None = Field(
        default=None,
        ge=1,
        description="Real-time providers: tokens per minute (default: learned from headers).",
    )
    max_concurrency: int | None = Field(
        default=None, ge=1, description="Real-time providers: most requests in flight at once."
    )
    base_url: str | None = Field(
        default=None,
        description="The provider API's base URL (for an OpenAI-compatible API, the prefix "
        "before /files and /batches); default: the provider's <NAME>_BASE_URL, else its own.",
    )
    distill_base_url: str | None = Field(
        default=None,
        description="With --distill: the embedding provider's base URL (as --base-url is the "
        "job's); default: --base-url when the embeddings go through the job's provider.",
    )
    completion_window: str | None = Field(
        default=None,
        description="Batch APIs: the window a batch must finish in, one the provider accepts "
        "(e.g. 1h, 24h, 7d); default 24h.",
    )
    quiet: bool = Field(default=False, description="No progress line.")
    wait: bool = Field(
        default=False,
        description="If another maple enrich drives this job, wait for it, then print the result "
        "(default: exit at once with code 2, saying where and since when it runs).",
    )
    timings_json: str | None = Field(
        default=None, description="Write per-stage wall times (JSON) to this file."
    )
    dry_run: bool = Field(
        default=False,
        description="Print the plan and the estimated tokens and cost; upload and submit nothing.",
    )
    debug: bool = Field(default=False, description="Show tracebacks and Dagster's warnings.")


class EnrichOptions(CommandOptions):
    """One ``maple enrich``: the job's spec (over its input), ``--retry-failed`` and the
    resolved storage root."""

    spec: JobSpec
    retry_failed: bool
    storage_root: str

    @property
    def input_path(self) -> str:
        """The input table (a job run by a command always has one)."""
        return str(self.spec.source)

    @property
    def provider(self) -> str:
        return self.spec.provider
