"""Bedrock batch inference jobs: input read from S3, output written to S3, lazy lifecycle.

The emulator reaches S3 through the endpoint it was started with (``--s3-endpoint``; moto's
server in tests) with the standard AWS credential chain. With ``B = batch_seconds`` a job is
``Submitted`` then ``Validating`` (reads and checks its input: JSONL of ``{recordId, modelInput}``,
at least ``bedrock_min_records`` and at most ``bedrock_max_records`` records, at most
``bedrock_max_bytes``), ``InProgress`` from ``0.1 B``, and ``Completed`` at ``B``, when it writes
``<output>/<job id>/<input file name>.out`` (``{recordId, modelInput, modelOutput | error}``) and
``<output>/<job id>/manifest.json.out``. A job drawn by the ``expired`` fault ends ``Expired``
without output; a stopped one is ``Stopping`` for ``0.1 B``, then ``Stopped`` with the records
run by the stop. An invalid input ends ``Failed`` with a ``message``. A job of Titan Text
Embeddings (``amazon.titan-embed-text-v2:0``) runs Titan's records (``emulator.bedrock.titan``).
"""

import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from emulator.anthropic.engine import AnthropicEngine
from emulator.bedrock.titan import is_titan_embedding, run_titan
from emulator.core.faults import billing_key, bytes_key, canonical
from emulator.core.files import RULES
from emulator.core.line_fates import LineFates

ACTIVE = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


@dataclass(eq=False)
class BedrockJob:
    arn: str
    name: str
    model: str
    role: str
    token: str | None
    input_uri: str
    output_uri: str
    created: float
    seconds: float
    expire: bool
    timeout_hours: int = 24
    tags: list[dict[str, str]] = field(default_factory=list)  # the create's ``tags``
    status: str = "Submitted"
    message: str | None = None
    stop_at: float | None = None
    ended_at: float | None = None
    modified: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    records: list[dict[str, Any]] | None = None  # read from S3 at validation, dropped at the end
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def job_id(self) -> str:
        return self.arn.rsplit("/", 1)[-1]

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "jobArn": self.arn,
            "jobName": self.name,
            "modelId": self.model,
            "roleArn": self.role,
            "status": self.status,
            "submitTime": iso(self.created),
            "lastModifiedTime": iso(self.modified or self.created),
            "inputDataConfig": {
                "s3InputDataConfig": {"s3Uri": self.input_uri, "s3InputFormat": "JSONL"}
            },
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": self.output_uri}},
            "timeoutDurationInHours": self.timeout_hours,
            "jobExpirationTime": iso(self.created + self.timeout_hours * 3600),
        }
        if self.token:
            body["clientRequestToken"] = self.token
        if self.message:
            body["message"] = self.message
        if self.ended_at is not None:
            body["endTime"] = iso(self.ended_at)
        for name in ("total", "processed", "success", "error"):
            if name in self.counts:
                body[f"{name}RecordCount"] = self.counts[name]
        return body


@dataclass
class Limits:
    min_records: int
    max_records: int
    max_bytes: int


class S3Access:
    """A boto3 S3 client on the emulator's ``--s3-endpoint`` (credentials: standard chain)."""

    def __init__(self, endpoint: str | None) -> None:
        self.endpoint = endpoint
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self.endpoint)
        return self._client

    def read(self, uri: str) -> bytes:
        bucket, key = split_s3(uri)
        return bytes(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def write(self, uri: str, data: bytes) -> None:
        bucket, key = split_s3(uri)
        self.client().put_object(Bucket=bucket, Key=key, Body=data)


def read_records(data: bytes, limits: Limits) -> tuple[list[dict[str, Any]], str | None]:
    """The input's records, or why validation fails (the job's ``message``)."""
    if len(data) > limits.max_bytes:
        return [], f"The input file is {len(data)} bytes; the limit is {limits.max_bytes} bytes."
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return [], f"Line {number} of the input file is not valid JSON."
        if not isinstance(record, dict) or not isinstance(record.get("modelInput"), dict):
            return [], f"Line {number} of the input file has no modelInput object."
        records.append(record)
    if not limits.min_records <= len(records) <= limits.max_records:
        return [], (
            f"The input has {len(records)} records; a batch inference job needs between "
            f"{limits.min_records} and {limits.max_records} records."
        )
    return records, None


def run_records(
    engine: AnthropicEngine, job: BedrockJob, records: list[dict[str, Any]], fates: LineFates
) -> tuple[bytes, dict[str, int], Counter[str], list[int]]:
    """Run Anthropic Messages bodies (Claude's native Bedrock format), or Titan embedding
    inputs, and build the output; ``fates``: the answered records it loses or repeats."""
    lines: list[bytes] = []
    stats: Counter[str] = Counter()
    billed: list[int] = []
    counts = {"in": 0, "out": 0, "ok": 0}
    titan = is_titan_embedding(job.model)
    for record in records:
        record_id = str(record.get("recordId", ""))
        params = {k: v for k, v in record["modelInput"].items() if k != "anthropic_version"}
        body = canonical(params)
        if titan:
            outcome = run_titan(engine.drawer, params, bytes_key(body))
        else:
            model = {**params, "model": job.model}
            outcome = engine.run(model, bytes_key(body), "batch", files_rule=RULES["bedrock"])
        if outcome.fault is not None:
            stats[f"fault_{outcome.fault}"] += 1
        copies = fates.copies() if outcome.status == 200 else 1
        if copies == 0:  # lost: counted a success, not billed, no line
            stats["lines_dropped"] += 1
            counts["ok"] += 1
            continue
        stats["lines_duplicated"] += copies == 2
        line: dict[str, Any] = {"recordId": record_id, "modelInput": record["modelInput"]}
        if outcome.status == 200:
            output = {k: v for k, v in outcome.body.items() if k != "model"}
            line["modelOutput"] = output
            billed.append(billing_key("bedrock", record_id, body))
            stats["file_parts"] += outcome.file_parts
            counts["ok"] += 1
            counts["in"] += outcome.prompt_tokens
            counts["out"] += outcome.completion_tokens
        else:
            message = str((outcome.body.get("error") or {}).get("message", "error"))
            line["error"] = {"errorCode": outcome.status, "errorMessage": message}
        lines += [orjson.dumps(line)] * copies
    stats["requests_received"] += len(records)
    stats["batch_lines_processed"] += len(records)
    return b"\n".join(lines) + b"\n" if lines else b"", counts, stats, billed


def manifest(total: int, processed: int, counts: dict[str, int]) -> bytes:
    return orjson.dumps(
        {
            "totalRecordCount": total,
            "processedRecordCount": processed,
            "successRecordCount": counts["ok"],
            "errorRecordCount": processed - counts["ok"],
            "inputTokenCount": counts["in"],
            "outputTokenCount": counts["out"],
        }
    )
