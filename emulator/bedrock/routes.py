"""Bedrock control-plane endpoints for batch inference (the boto3 ``bedrock`` client's REST API).

``CreateModelInvocationJob`` (``POST /model-invocation-job``), ``GetModelInvocationJob``
(``GET /model-invocation-job/{id}``), ``ListModelInvocationJobs`` (``GET
/model-invocation-jobs``), ``StopModelInvocationJob`` (``POST /model-invocation-job/{id}/stop``).
Errors are rest-json: the ``x-amzn-ErrorType`` header names the exception, the body carries
``message``. Requests must be signed (any SigV4 signature is accepted).
"""

import hashlib
import re
import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.bedrock import jobs as bj
from emulator.bedrock.titan import is_titan_embedding
from emulator.core.faults import body_key
from emulator.core.http_common import JSONResponse, control_fault, state_of
from emulator.core.line_fates import LineFates
from emulator.core.state import State

ROLE = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
NAME = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}")
MAX_TAGS = 200
ACCOUNT, REGION = "123456789012", "us-east-1"


def aws_error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status, {"x-amzn-ErrorType": kind})


def _guard(request: Request) -> Response | None:
    auth = request.headers.get("authorization", "")
    if not auth.startswith(("AWS4-HMAC-SHA256", "Bearer ")):
        return aws_error(403, "AccessDeniedException", "Missing Authentication Token")
    if control_fault(request) is not None:
        return aws_error(500, "InternalServerException", "Internal server error, retry.")
    return None


def advance(state: State, job: bj.BedrockJob, now: float) -> None:
    """Move ``job`` to where it is at ``now``; run its records when it ends."""
    with job.lock:
        if job.ended_at is not None:
            return
        job.modified = now
        if job.stop_at is not None:
            settle = job.stop_at + 0.1 * job.seconds
            job.status = "Stopping"
            if now >= settle:
                _end(state, job, settle, "Stopped", _done_by(job, job.stop_at))
            return
        if now < job.created + 0.1 * job.seconds:
            job.status = "Validating"
            return
        problem = _validate(state, job)
        if problem is not None:
            job.status, job.message, job.ended_at = "Failed", problem, now
        elif now >= job.created + job.seconds:
            if job.expire:
                job.status, job.ended_at = "Expired", job.created + job.seconds
                job.message = "The job timed out before it started. Submit a new job."
            else:
                _end(state, job, job.created + job.seconds, "Completed", None)
        else:
            job.status = "InProgress"


def _validate(state: State, job: bj.BedrockJob) -> str | None:
    if "total" in job.counts:
        return None
    limits = bj.Limits(
        state.config.bedrock_min_records,
        state.config.bedrock_max_records,
        state.config.bedrock_max_bytes,
    )
    try:
        data = state.s3.read(job.input_uri)
    except (BotoCoreError, ClientError) as exc:  # Bedrock fails the job on an unreadable input
        return f"Unable to read the input {job.input_uri}: {exc}"
    records, problem = bj.read_records(data, limits)
    if problem is None:
        job.records = records
        job.counts["total"] = len(records)
    return problem


def _done_by(job: bj.BedrockJob, moment: float) -> int:
    total = job.counts.get("total", 0)
    if job.seconds <= 0:
        return total
    return int(min(1.0, max(0.0, (moment - job.created) / job.seconds)) * total)


def _end(state: State, job: bj.BedrockJob, at: float, status: str, done: int | None) -> None:
    if _validate(state, job) is None:
        records, job.records = job.records or [], None
        run = records if done is None else records[:done]
        config = state.config
        drop = config.drop_lines if done is None else 0.0  # a job that ran every record
        fates = LineFates(config.seed, job.job_id, drop, config.duplicate_lines)
        data, counts, stats, billed = bj.run_records(state.anthropic, job, run, fates)
        base = f"{job.output_uri.rstrip('/')}/{job.job_id}"
        name = job.input_uri.rsplit("/", 1)[-1]
        state.s3.write(f"{base}/{name}.out", data)
        state.s3.write(f"{base}/manifest.json.out", bj.manifest(len(records), len(run), counts))
        job.counts.update(processed=len(run), success=counts["ok"], error=len(run) - counts["ok"])
        stats["bedrock_jobs_ended"] += 1
        state.stats.merge(stats)
        state.stats.bill(billed, "embedding" if is_titan_embedding(job.model) else "chat")
    job.status, job.ended_at = status, at


async def create_job(request: Request) -> Response:
    """``CreateModelInvocationJob``."""
    if (refused := _guard(request)) is not None:
        return refused
    state = state_of(request)
    body = await request.json()
    problem = _check_create(state, body)
    if problem is not None:
        return problem
    token = body.get("clientRequestToken")
    with state.lock:
        for job in state.bedrock_jobs.values():
            if token and job.token == token:
                return JSONResponse({"jobArn": job.arn})
        active = [j for j in state.bedrock_jobs.values() if j.status in bj.ACTIVE]
        if len(active) >= state.config.bedrock_max_jobs:
            return aws_error(
                400, "ServiceQuotaExceededException",
                f"You have reached the quota of {state.config.bedrock_max_jobs} submitted and "
                "in-progress batch inference jobs.",
            )  # fmt: skip
        job = _new_job(state, body)
        state.bedrock_jobs[job.arn] = job
    state.stats.add("batches_created")
    state.finisher.schedule(job.created + 0.1 * job.seconds, lambda: _tick(state, job))
    state.finisher.schedule(job.created + job.seconds, lambda: _tick(state, job))
    return JSONResponse({"jobArn": job.arn})


def _tick(state: State, job: bj.BedrockJob) -> None:
    advance(state, job, time.time())


def _check_create(state: State, body: Any) -> Response | None:
    if state.config.s3_endpoint is None:
        return aws_error(400, "ValidationException", "The emulator cannot reach S3: start it "
                         "with --s3-endpoint URL (maple emulator --s3-endpoint ...).")  # fmt: skip
    for name in ("jobName", "roleArn", "modelId", "inputDataConfig", "outputDataConfig"):
        if not body.get(name):
            return aws_error(400, "ValidationException", f"{name} is required.")
    if not NAME.fullmatch(str(body["jobName"])) or len(body["jobName"]) > 63:
        return aws_error(400, "ValidationException", "jobName does not match the pattern.")
    if not ROLE.fullmatch(str(body["roleArn"])):
        return aws_error(400, "ValidationException", "roleArn is not an IAM role ARN.")
    source = (body["inputDataConfig"].get("s3InputDataConfig") or {}).get("s3Uri", "")
    target = (body["outputDataConfig"].get("s3OutputDataConfig") or {}).get("s3Uri", "")
    if not str(source).startswith("s3://") or not str(target).startswith("s3://"):
        return aws_error(400, "ValidationException", "Input and output must be s3:// URIs.")
    return _tags_problem(body.get("tags"))


def _tags_problem(tags: Any) -> Response | None:
    """AWS's check of a create's ``tags``: at most 200 of ``{"key", "value"}`` strings."""
    if tags is None:
        return None
    if (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or not all(
            isinstance(t, dict)
            and isinstance(t.get("key"), str)
            and isinstance(t.get("value"), str)
            and 1 <= len(t["key"]) <= 128
            and len(t["value"]) <= 256
            for t in tags
        )
    ):
        return aws_error(400, "ValidationException", "tags: at most 200 of {key, value}.")
    return None


def _new_job(state: State, body: dict[str, Any]) -> bj.BedrockJob:
    job_id = hashlib.sha256(f"{time.time_ns()}{body['jobName']}".encode()).hexdigest()[:12]
    drawer = state.drawer
    key = body_key(body.get("inputDataConfig"))
    expire = "expired" in drawer.rates and drawer.hit("expired", key, drawer.next_attempt(key))
    return bj.BedrockJob(
        arn=f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{job_id}",
        name=str(body["jobName"]),
        model=str(body["modelId"]),
        role=str(body["roleArn"]),
        token=body.get("clientRequestToken"),
        input_uri=body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"],
        output_uri=body["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"],
        created=time.time(),
        seconds=state.durations.draw(_record_count(state, body)),
        expire=expire,
        timeout_hours=int(body.get("timeoutDurationInHours") or 24),
        tags=[{"key": t["key"], "value": t["value"]} for t in body.get("tags") or []],
    )


def _record_count(state: State, body: dict[str, Any]) -> int:
    """The input's non-empty lines, when a batch's duration depends on its size (0 if the input
    cannot be read: the job then fails at validation)."""
    if state.config.batch_seconds_per_1k <= 0:
        return 0
    try:
        data = state.s3.read(body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
    except (BotoCoreError, ClientError):
        return 0
    return sum(1 for line in data.splitlines() if line.strip())


def _job_or_404(request: Request) -> bj.BedrockJob | Response:
    ident = str(request.path_params["job"])
    jobs: dict[str, bj.BedrockJob] = state_of(request).bedrock_jobs
    for job in jobs.values():
        if ident in {job.arn, job.job_id}:
            return job
    return aws_error(404, "ResourceNotFoundException", f"Job {ident} not found.")


async def list_tags(request: Request) -> Response:
    """``ListTagsForResource``: the tags a job was created with (AWS cost allocation reads
    them)."""
    if (refused := _guard(request)) is not None:
        return refused
    arn = str((await request.json()).get("resourceARN") or "")
    for job in state_of(request).bedrock_jobs.values():
        if arn == job.arn:
            return JSONResponse({"tags": job.tags})
    return aws_error(404, "ResourceNotFoundException", f"Resource {arn} not found.")


async def get_job(request: Request) -> Response:
    """``GetModelInvocationJob``."""
    if (refused := _guard(request)) is not None:
        return refused
    job = _job_or_404(request)
    if isinstance(job, Response):
        return job
    await run_in_threadpool(advance, state_of(request), job, time.time())
    return JSONResponse(job.as_json())


async def list_jobs(request: Request) -> Response:
    """``ListModelInvocationJobs``: newest first unless ``sortOrder=Ascending``."""
    if (refused := _guard(request)) is not None:
        return refused
    state, query = state_of(request), request.query_params
    jobs = sorted(state.bedrock_jobs.values(), key=lambda j: j.created)
    if query.get("sortOrder", "Descending") == "Descending":
        jobs.reverse()
    for job in jobs:
        await run_in_threadpool(advance, state, job, time.time())
    if query.get("nameContains"):
        jobs = [j for j in jobs if query["nameContains"] in j.name]
    if query.get("statusEquals"):
        jobs = [j for j in jobs if j.status == query["statusEquals"]]
    size = int(query.get("maxResults") or 100)
    start = int(query.get("nextToken") or 0)
    body: dict[str, Any] = {
        "invocationJobSummaries": [j.as_json() for j in jobs[start : start + size]]
    }
    if start + size < len(jobs):
        body["nextToken"] = str(start + size)
    return JSONResponse(body)


async def stop_job(request: Request) -> Response:
    """``StopModelInvocationJob``: ``Stopping`` for ``0.1 B``, then ``Stopped``."""
    if (refused := _guard(request)) is not None:
        return refused
    state = state_of(request)
    job = _job_or_404(request)
    if isinstance(job, Response):
        return job
    await run_in_threadpool(advance, state, job, time.time())
    if job.ended_at is not None:
        return aws_error(400, "ValidationException", f"Job {job.job_id} is already {job.status}.")
    with job.lock:
        job.stop_at = job.stop_at or time.time()
        job.status = "Stopping"
    state.finisher.schedule(job.stop_at + 0.1 * job.seconds, lambda: _tick(state, job))
    return JSONResponse({})


ROUTES = [
    Route("/model-invocation-job", create_job, methods=["POST"]),
    Route("/listTagsForResource", list_tags, methods=["POST"]),
    Route("/model-invocation-jobs", list_jobs, methods=["GET"]),
    Route("/model-invocation-job/{job:path}/stop", stop_job, methods=["POST"]),
    Route("/model-invocation-job/{job:path}", get_job, methods=["GET"]),
]
