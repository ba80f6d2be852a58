"""Bedrock's runtime OpenAI API (``https://bedrock-runtime.{region}.amazonaws.com/openai/v1``),
served under ``/bedrock-runtime/openai/v1`` (the emulator serves every host on one port; Azure's
v1 API holds ``/openai/v1``), by the OpenAI routes and engine.

What AWS documents (https://docs.aws.amazon.com/bedrock/latest/userguide/inference-openai-batch.html)
and the emulator holds a client to:

- a batch create carries the ``X-Amzn-Bedrock-RoleArn`` and ``X-Amzn-Bedrock-ModelId`` headers
  (both required: 400 without one), its ``endpoint`` is ``/v1/chat/completions`` (400 for
  another), and its ``input_file_id`` is the S3 URI of the JSONL input (there is no ``/files``
  upload here: 404), read from the emulator's ``--s3-endpoint``;
- the results and errors are written to the input's folder, in a folder named after the batch:
  ``{input folder}/{batch id}/{input name}.out`` and ``.err``; the batch's ``output_file_id``
  and ``error_file_id`` name those objects;
- the key is a Bedrock API key as a bearer token
  (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html);
- ``/chat/completions`` answers in real time
  (https://docs.aws.amazon.com/bedrock/latest/userguide/inference-chat-completions.html).

Retrieve, list and cancel are OpenAI's.
"""

import zlib
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.core.http_common import openai_error, openai_json, read_json, state_of
from emulator.core.state import State
from emulator.openai import batches as openai_batches
from emulator.openai import realtime
from emulator.openai import routes as openai

PREFIX = "/bedrock-runtime/openai/v1"
ROLE_HEADER = "x-amzn-bedrock-rolearn"
MODEL_HEADER = "x-amzn-bedrock-modelid"
ENDPOINT = "/v1/chat/completions"


async def create_batch(request: Request) -> Response:
    """``POST /openai/v1/batches`` on Bedrock: the input from S3, the model from a header."""
    if (refused := await openai._guard(request)) is not None:
        return refused
    payload, bad = await read_json(request)
    if bad is not None:
        return bad
    missing = [h for h in (ROLE_HEADER, MODEL_HEADER) if not request.headers.get(h)]
    source = str(payload.get("input_file_id") or "")
    problem = (
        f"Missing required header: {missing[0]}"
        if missing
        else f"endpoint must be {ENDPOINT}"
        if payload.get("endpoint") != ENDPOINT
        else "input_file_id must be the S3 URI of the batch JSONL file"
        if not source.startswith("s3://")
        else None
    )
    if problem is not None:
        return openai_error(400, problem, "invalid_request_error")
    state = state_of(request)
    try:
        data = await run_in_threadpool(state.s3.read, source)
    except Exception:  # noqa: BLE001 - boto's NoSuchKey, NoSuchBucket, access denied
        return openai_error(400, f"Cannot read {source} from S3", "invalid_request_error")
    path = state.new_path()
    path.write_bytes(data)
    stored = state.add_file(source.rsplit("/", 1)[-1], "batch", path, zlib.crc32(data))
    batch = openai.start_batch(
        request,
        stored,
        endpoint=ENDPOINT,
        window=str(payload.get("completion_window") or "24h"),
        metadata=payload.get("metadata"),
    )
    with state.lock:
        state.bedrock_openai_inputs[batch.id] = source
    return openai_json(_in_s3(state, openai_batches.batch_json(batch, batch.created)))


async def list_batches(request: Request) -> Response:
    """``GET /openai/v1/batches``: OpenAI's listing, each batch's files named in S3."""
    listed = await openai.list_batches(request)
    if listed.status_code != 200:
        return listed
    page = orjson.loads(bytes(listed.body))
    state = state_of(request)
    page["data"] = [await run_in_threadpool(_in_s3, state, b) for b in page["data"]]
    return openai_json(page)


async def get_batch(request: Request) -> Response:
    """``GET /openai/v1/batches/{id}``: OpenAI's answer, its result files written to S3 once it
    has them and named by their S3 URIs."""
    if (refused := await openai._guard(request)) is not None:
        return refused
    state = state_of(request)
    batch = openai._batch_or_404(request, request.path_params["batch_id"])
    if isinstance(batch, Response):
        return batch
    found = await run_in_threadpool(openai_batches.observe, state, batch)
    return openai_json(await run_in_threadpool(_in_s3, state, found))


def _in_s3(state: State, batch: dict[str, Any]) -> dict[str, Any]:
    """``batch`` naming its input by its S3 URI, with its output and error files copied to S3
    beside the input and named there."""
    source = state.bedrock_openai_inputs.get(batch["id"])
    if source is None:
        return batch
    folder, _, name = source.rpartition("/")
    named = {**batch, "input_file_id": source}
    for field, suffix in (("output_file_id", "out"), ("error_file_id", "err")):
        stored = state.files.get(str(batch.get(field)))
        if stored is None:
            continue
        uri = f"{folder}/{batch['id']}/{name}.{suffix}"
        with state.lock:
            written = uri in state.bedrock_openai_written
            state.bedrock_openai_written.add(uri)
        if not written:
            state.s3.write(uri, stored.path.read_bytes())
        named[field] = uri
    return named


async def no_files(request: Request) -> Response:
    """Bedrock's runtime serves no Files API: the input goes to S3."""
    return openai_error(404, f"Unknown request URL: {request.url.path}", "invalid_request_error")


ROUTES = [
    Route(f"{PREFIX}/batches", create_batch, methods=["POST"]),
    Route(f"{PREFIX}/batches", list_batches, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id}}", get_batch, methods=["GET"]),
    Route(f"{PREFIX}/batches/{{batch_id}}/cancel", openai.cancel_batch, methods=["POST"]),
    Route(f"{PREFIX}/files", no_files, methods=["GET", "POST"]),
    Route(f"{PREFIX}/chat/completions", realtime.openai_realtime, methods=["POST"]),
]
