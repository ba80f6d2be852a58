"""AWS Bedrock batch inference provider: input JSONL written under the S3 storage root, jobs
created with ``CreateModelInvocationJob``, output ``.jsonl.out`` read back from S3.

Layout under the storage root (which must be ``s3://``)::

    <job>/bedrock/input/<shard>-a<attempt>-<hash>.jsonl     the job's records
    <job>/bedrock/output/<shard>-a<attempt>/<job id>/...     Bedrock's output and manifest

Labels: the job name is ``maple-<job>-<shard>-a<attempt>`` and the input object's name carries
the content hash, so ``find_orphans`` re-finds a job created just before a crash; the create's
``clientRequestToken`` is derived from (job, shard, attempt, hash), so a create retried after an
ambiguous failure returns the same job instead of a second one. Credentials, region and
endpoints come from the standard AWS chain (``AWS_ENDPOINT_URL_BEDROCK``, ``AWS_ENDPOINT_URL_S3``).
Bedrock's quotas are checked before a job is created: records per job (``min_records`` to
``max_records``), bytes per input file, and jobs in flight (``max_jobs``: waits for a free slot).
"""

import hashlib
import time
from typing import Any, ClassVar

import orjson
import polars as pl
from pydantic import Field

from maple_engine.crashpoints import crash_point
from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import CHAT, EMBEDDING, BatchState, Submission
from maple_engine.providers.anthropic import params as anthropic_params
from maple_engine.providers.anthropic.file_parts import BEDROCK_FILES
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    Dialect,
    ModelFamily,
    ProviderCapabilities,
    ProviderLimits,
    ProviderModel,
    RequestSpec,
    ShardPayload,
    json_string_expr,
    poll_batches,
    result_frame,
    rows_frame,
)
from maple_engine.providers.batch_api import BatchProviderBasics
from maple_engine.providers.bedrock import wire
from maple_engine.providers.bedrock.aws import BedrockCalls
from maple_engine.settings import DEFAULT_STORAGE
from maple_engine.storage.layout import JobLayout, join, last_part
from maple_engine.storage.storage import Storage, filesystem_for, is_remote

STATES = {
    "Submitted": "validating",
    "Validating": "validating",
    "Scheduled": "validating",
    "InProgress": "in_progress",
    "Stopping": "cancelling",
    "Completed": "completed",
    "PartiallyCompleted": "completed",
    "Failed": "failed",
    "Stopped": "cancelled",
    "Expired": "expired",
}
BELOW_MINIMUM = "not-sent-below-minimum:"
ACTIVE = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})
_ENDED = {"completed", "failed", "cancelled", "expired"}
FOLDER = "bedrock"  # the job's input and output objects: <job>/bedrock/input|output/...
CAPABILITIES = ProviderCapabilities(
    mode="batch",
    limits=ProviderLimits(
        max_requests=BATCH_FILE_LIMITS.max_requests,
        max_bytes=1024 * 1024 * 1024,
        min_requests=100,
    ),
    dialect=Dialect.ANTHROPIC,  # Bedrock batches run Claude
    rules=anthropic_params.RULES,
    price_families=("aws",),
    orphans="name-labels",
    needs_s3_root=True,
    drops_empty_system=True,
    takes_role_arn=True,
    family="bedrock",
    # boto3's chain: the credentials, the region, and the endpoints (the emulator's, in tests)
    sdk_env=(
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_ENDPOINT_URL_BEDROCK",
        "AWS_ENDPOINT_URL_S3",
    ),
    attribution="job-tags",
    kinds=frozenset({CHAT, EMBEDDING}),  # Claude; Titan Text Embeddings
    models=(
        ModelFamily("titan-embed", EMBEDDING, max_dimensions=wire.TITAN_DIMENSIONS[-1]),
        ModelFamily("anthropic.", CHAT),
    ),
    files=BEDROCK_FILES,
)


class BedrockBatchProvider(BatchProviderBasics, ProviderModel):
    """Runs shards as Bedrock batch inference jobs (Claude models, Titan Text Embeddings V2; 50%
    of on-demand prices)."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    name: str = Field(default="bedrock", description="Provider name recorded in costs and output.")
    role_arn: str | None = Field(
        default=None,
        description="Service role Bedrock assumes to read/write S3; MAPLE_BEDROCK_ROLE_ARN.",
    )
    storage_root: str = Field(
        default=DEFAULT_STORAGE, description="The job's storage root; must be s3://."
    )
    region: str | None = Field(default=None, description="AWS region; default: the AWS chain.")
    max_retries: int = Field(default=6, description="Retries of a control call (botocore).")
    min_records: int = Field(
        default=CAPABILITIES.limits.min_requests,
        description="Bedrock quota: fewest records per job.",
    )
    max_records: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Bedrock quota: most records per job."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes,
        description="Bedrock quota: bytes per input file (1 GB).",
    )
    max_jobs: int = Field(default=20, description="Bedrock quota: jobs submitted or in progress.")
    slot_wait_s: float = Field(default=3600.0, description="Longest wait for a free job slot.")
    slot_poll_s: float = Field(default=5.0, description="Seconds between job-slot checks.")
    timeout_hours: int = Field(default=24, description="Job timeout (Bedrock: 24-168 hours).")

    def limits(self) -> ProviderLimits:
        return ProviderLimits(self.max_records, self.max_bytes, self.min_records)

    def resolved_role(self) -> str:
        role = self.role_arn
        if not role:
            raise ConfigError(
                "MAPLE_BEDROCK_ROLE_ARN is not set: export the ARN of the IAM service role "
                "Bedrock assumes to read the input from and write the output to S3."
            )
        return role

    def check_credentials(self) -> None:
        if not is_remote(self.storage_root):
            raise ConfigError(
                f"--provider bedrock needs an S3 storage root (Bedrock batch jobs read their "
                f"input from S3 and write their output to S3), got the local {self.storage_root!r}"
                ". Pass --storage s3://bucket/prefix (or set MAPLE_STORAGE)."
            )
        self.resolved_role()

    def _calls(self) -> BedrockCalls:
        return BedrockCalls(self.region, self.max_retries, self.extra_headers)

    # -- encoding ---------------------------------------------------------------------------
    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return wire.body_expr(spec, user, image, files)

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        fixed = len(wire.HEAD) + len(wire.MID) + 1 + 1  # closing brace and newline
        return json_string_expr(custom_id).str.len_bytes() + request.str.len_bytes() + fixed

    def encode(self, requests: pl.DataFrame) -> bytes:
        return wire.record_lines(requests)

    # -- lifecycle --------------------------------------------------------------------------
    def _check_quota(self, payload: ShardPayload, data: bytes) -> None:
        count, where = payload.requests.height, f"job {payload.job} shard {payload.shard}"
        where += f" attempt {payload.attempt}"
        if count > self.max_records or len(data) > self.max_bytes:
            raise ConfigError(
                f"{where} has {count} records / {len(data)} bytes; Bedrock allows at most "
                f"{self.max_records} records and {self.max_bytes} bytes per job."
            )

    def submit(self, payload: ShardPayload) -> Submission:
        self.check_credentials()
        data, digest = payload.encoded(self.encode)
        self._check_quota(payload, data)
        if payload.requests.height < self.min_records:
            return self._below_minimum(payload, digest)
        stem = f"{payload.shard}-a{payload.attempt}"
        layout = JobLayout(payload.job)
        key = layout.provider_files(FOLDER, "input", f"{stem}-{digest}.jsonl")
        storage = Storage(self.storage_root)
        storage.write_bytes(key, data)
        crash_point("after_upload")
        token = hashlib.sha256(f"{payload.job}|{stem}|{digest}".encode()).hexdigest()[:40]
        calls = self._calls()
        self._wait_for_slot(calls)
        arn = calls.create(
            jobName=wire.job_name(payload.job, payload.shard, payload.attempt),
            roleArn=self.resolved_role(),
            clientRequestToken=f"maple{token}",
            modelId=payload.model,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": storage.uri(key)}},
            outputDataConfig={
                "s3OutputDataConfig": {
                    "s3Uri": storage.uri(layout.provider_files(FOLDER, "output", stem) + "/")
                }
            },
            timeoutDurationInHours=self.timeout_hours,
            **self._tags(),
        )
        return payload.submission(self.name, arn, digest, file_id=storage.uri(key))

    def _tags(self) -> dict[str, Any]:
        """The job's ``tags`` (the team's ``bedrock_tags``): AWS cost allocation groups by them."""
        tags = self.team.bedrock_tags
        return {"tags": [{"key": k, "value": v} for k, v in tags.items()]} if tags else {}

    def _below_minimum(self, payload: ShardPayload, digest: str) -> Submission:
        """An attempt smaller than Bedrock's minimum job: not sent; its rows come back failed.

        Bedrock refuses jobs under ``min_records`` records (a small table, the table's last
        shard, or a retry of a few rows) and padding them would pay for rows again, so those
        rows end ``invalid_request`` with this reason instead of stopping the whole job.
        """
        name = f"{BELOW_MINIMUM}{payload.job}/{payload.shard}/{payload.attempt}"
        return payload.submission(self.name, f"{name}/{payload.requests.height}", digest)

    def _below_minimum_state(self, batch_id: str) -> BatchState:
        count = batch_id.rsplit("/", 1)[-1]
        message = (
            f"not sent: this batch has {count} rows and a Bedrock batch inference job needs at "
            f"least {self.min_records} records (a small table, its last shard, or a retry); "
            "send these rows with another provider, e.g. --provider anthropic"
        )
        return BatchState(
            batch_id, "failed", ended=True, errors=(message,), error_codes=("below_minimum",)
        )

    def _wait_for_slot(self, calls: BedrockCalls) -> None:
        deadline = time.monotonic() + self.slot_wait_s
        while sum(1 for job in calls.jobs() if job.get("status") in ACTIVE) >= self.max_jobs:
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"Bedrock still has {self.max_jobs} batch jobs submitted or in progress after "
                    f"{self.slot_wait_s:.0f} s; rerun later or raise the account quota."
                )
            time.sleep(self.slot_poll_s)

    def _state(self, job: dict[str, Any]) -> BatchState:
        status = STATES.get(str(job.get("status")), "validating")
        message = str(job.get("message") or "")
        return BatchState(
            batch_id=str(job["jobArn"]),
            status=status,
            ended=status in _ENDED,
            errors=(message,) if status == "failed" and message else (),
            error_codes=("invalid_input",) if status == "failed" else (),
            completed=int(job.get("successRecordCount") or 0),
            failed=int(job.get("errorRecordCount") or 0),
            total=int(job.get("totalRecordCount") or 0),
        )

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        calls = self._calls()
        small = {s.batch_id for s in submissions if s.batch_id.startswith(BELOW_MINIMUM)}
        states = {batch_id: self._below_minimum_state(batch_id) for batch_id in small}
        return states | poll_batches(
            {s.batch_id for s in submissions} - small,
            lambda: ({**job, "id": job["jobArn"]} for job in calls.jobs("maple-")),
            calls.get,
            self._state,
        )

    def check_endpoint(self) -> None:
        """Nothing here: boto3 finds the endpoint and credentials, and its errors name them."""

    def cancel(self, submission: Submission) -> None:
        if not submission.batch_id.startswith(BELOW_MINIMUM):
            self._calls().stop(submission.batch_id)

    def find_orphans(self, job: str) -> list[Submission]:
        found = []
        marker = f"/{job}/{FOLDER}/input/"
        for summary in self._calls().jobs(f"maple-{wire.job_slug(job)}-"):
            source = summary["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
            labels = wire.parse_input_name(source)
            if labels is None or marker not in source or summary.get("status") == "Failed":
                continue
            shard, attempt, digest = labels
            found.append(
                Submission(
                    provider=self.name,
                    job=job,
                    shard=shard,
                    attempt=attempt,
                    batch_id=str(summary["jobArn"]),
                    request_count=int(summary.get("totalRecordCount") or 0),
                    content_hash=digest,
                    submitted_at=str(summary.get("submitTime", "")),
                    file_id=source,
                    adopted=True,
                )
            )
        return found

    # -- results ----------------------------------------------------------------------------
    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        if submission.batch_id.startswith(BELOW_MINIMUM):
            return result_frame({})
        job = self._calls().get(submission.batch_id)
        output = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"].rstrip("/")
        source = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
        job_id = submission.batch_id.rsplit("/", 1)[-1]
        uri = join(output, job_id, f"{last_part(source)}.out")
        fs, path = filesystem_for(uri)
        content = fs.cat_file(path) if fs.exists(path) else b""
        crash_point("mid_download")
        rows = [wire.parse_output_line(orjson.loads(r)) for r in content.splitlines() if r.strip()]
        return rows_frame(rows, submission.batch_id)
