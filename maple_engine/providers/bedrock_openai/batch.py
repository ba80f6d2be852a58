"""``--provider bedrock-openai``: OpenAI-format batches on Bedrock's Runtime, run by the OpenAI
batch provider, with the input and results in S3 (`maple_engine.providers.bedrock_openai.wire`).

Layout under the storage root (which must be ``s3://``)::

    <job>/bedrock-openai/input/<shard>-<attempt>-<hash>/<shard>-<attempt>.jsonl   the input
    <job>/bedrock-openai/input/<shard>-<attempt>-<hash>/<batch id>/...jsonl.out   Bedrock's

Each input has a folder of its own, so the results Bedrock writes beside it are that batch's.
The create names the model and the role in headers; the batch's metadata labels it (job, shard,
attempt, content digest), so a create whose answer is lost, and a batch made just before a
crash, are found again in the batch listing as OpenAI's are. Chat only: AWS's page names
``/v1/chat/completions`` as the one endpoint.
"""

import dataclasses
import tempfile
from typing import ClassVar

import polars as pl
from pydantic import Field

from maple_engine.crashpoints import crash_point
from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import CHAT, BatchState, Submission
from maple_engine.providers.base import ProviderCapabilities, ShardPayload, result_frame
from maple_engine.providers.bedrock.batch import CAPABILITIES as BEDROCK
from maple_engine.providers.bedrock_openai import wire
from maple_engine.providers.lost import LOST
from maple_engine.providers.openai.batch import CAPABILITIES as OPENAI
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.openai.lines import parse_result_file
from maple_engine.settings import BEDROCK_ROLE_ENV, DEFAULT_STORAGE
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage, filesystem_for, is_remote

NAME = "bedrock-openai"
CAPABILITIES = dataclasses.replace(
    OPENAI,
    price_families=("aws", "openai"),
    kinds=frozenset({CHAT}),
    queue="none",
    realtime_twin="bedrock-openai-realtime",
    flex_twin=None,
    priority_twin=None,
    endpoints=frozenset({"chat"}),
    reasoning_models=(),
    models=(),
    credentials=wire.CREDENTIALS,
    api_key_env=wire.KEY_ENV,
    billing_report=None,
    attribution=None,
    caching=None,
    needs_s3_root=True,
    takes_role_arn=True,
    family=NAME,
    # boto3's chain for S3 (not Bedrock's control plane, which this API does not call)
    sdk_env=tuple(v for v in BEDROCK.sdk_env if v != "AWS_ENDPOINT_URL_BEDROCK"),
    # the results stay in the user's bucket: no retention of Bedrock's own
    results_retention_s=None,
    webhooks=None,
    # "Batch: 50% cost savings vs on-demand" (https://docs.aws.amazon.com/bedrock/latest/
    # userguide/capacity-limits-cost-optimization.html); AWS's pages state no other share for
    # the OpenAI batch API, nor a minimum of records per batch (its model invocation jobs'
    # 100 is not said of it, so none is applied)
    batch_price_share=0.5,
    files=None,  # Bedrock's OpenAI models take text here
)


class BedrockOpenAIBatchProvider(OpenAIBatchProvider):
    """OpenAI's batches on ``https://bedrock-runtime.{region}.amazonaws.com/openai/v1``: the
    input written to S3, the batch created naming it, the results read from S3."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    default_base_url: ClassVar[str | None] = None

    name: str = Field(default=NAME, description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"Bedrock API key ({wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description=f"The Runtime's OpenAI prefix, the part before /batches ({wire.BASE_URL_ENV}"
        "); default: https://bedrock-runtime.{AWS_REGION}.amazonaws.com/openai/v1.",
    )
    region: str | None = Field(default=None, description="AWS region; default: AWS_REGION.")
    role_arn: str | None = Field(
        default=None,
        description=f"Batch service role Bedrock assumes to read and write S3; {BEDROCK_ROLE_ENV}.",
    )
    storage_root: str = Field(
        default=DEFAULT_STORAGE, description="The job's storage root; must be s3://."
    )

    def resolved_base_url(self) -> str:
        return (self.base_url or wire.runtime_url(self.region)).rstrip("/")

    def check_credentials(self) -> None:
        if not is_remote(self.storage_root):
            raise ConfigError(
                f"--provider {NAME} needs an S3 storage root (Bedrock reads the batch input from "
                f"S3 and writes the results there), got the local {self.storage_root!r}. Pass "
                "--storage s3://bucket/prefix (or set MAPLE_STORAGE)."
            )
        if not self.role_arn:
            raise ConfigError(
                f"{BEDROCK_ROLE_ENV} is not set: export the ARN of the batch service role Bedrock "
                "assumes to read the input from and write the results to S3."
            )
        self.auth_headers()
        super().check_credentials()

    def submit(self, payload: ShardPayload) -> Submission:
        self.check_credentials()
        data, digest = payload.encoded(self.encode)
        stem = f"{payload.shard}-{payload.attempt}"
        key = JobLayout(payload.job).provider_files(
            wire.FOLDER, "input", f"{stem}-{digest[:16]}/{stem}.jsonl"
        )
        storage = Storage(self.storage_root)
        storage.write_bytes(key, data)
        source = storage.uri(key)
        crash_point("after_upload")
        with self._client() as client:
            created = self._create(client, payload, source, digest)
        return payload.submission(self.name, str(created.json()["id"]), digest, file_id=source)

    def _create_headers(self, payload: ShardPayload) -> dict[str, str]:
        return {wire.ROLE_HEADER: str(self.role_arn), wire.MODEL_HEADER: payload.model}

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        if state.status == LOST or not submission.file_id:
            return result_frame({})
        frames = [result_frame({})]
        for uri in wire.result_uris(submission.file_id, submission.batch_id):
            fs, path = filesystem_for(uri)
            if not fs.exists(path):  # a batch with no failed line writes no .err
                continue
            with tempfile.NamedTemporaryFile(prefix="maple-", suffix=".jsonl") as spool:
                try:
                    spool.write(fs.cat_file(path))
                except OSError as exc:
                    raise ProviderError(f"download {uri}: {exc}") from exc
                spool.flush()
                frames.append(parse_result_file(spool.name, submission.batch_id, self._parse_line))
            crash_point("mid_download")
        return pl.concat(frames)
