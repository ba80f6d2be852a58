"""Drive a Mistral API with the official ``mistralai`` SDK and print what it answered, as JSON.

Run by ``tests/e2e/test_mistral_sdk.py`` with the Python of the SDK's own virtualenv
(``MAPLE_TEST_MISTRALAI_PYTHON``; the product never imports the SDK) against the emulator:
``python scripts/mistral_sdk_walk.py BASE_URL`` (the host before ``/v1``). Every answer goes
through the SDK's own response models, so a member the emulator leaves out, or a shape it gets
wrong, fails here as it would for a user of the SDK.

The walk: upload a chat batch file, read it back, create a job, poll it to its end, download
its results, list the jobs by metadata and status; an embeddings job (``/v1/embeddings``) the
same way; create a job and cancel it; a real-time chat completion and an embeddings call.
"""

import json
import sys
import time
from typing import Any

from mistralai.client import Mistral

ENDED = ("SUCCESS", "FAILED", "TIMEOUT_EXCEEDED", "CANCELLED")


def upload(client: Any, bodies: list[dict[str, Any]]) -> Any:
    lines = [json.dumps({"custom_id": str(i), "body": body}) for i, body in enumerate(bodies)]
    content = ("\n".join(lines) + "\n").encode()
    return client.files.upload(file={"file_name": "in.jsonl", "content": content}, purpose="batch")


def run_job(client: Any, file_id: str, model: str, endpoint: str, tag: str) -> Any:
    job = client.batch.jobs.create(
        input_files=[file_id], model=model, endpoint=endpoint, metadata={"walk": tag},
        timeout_hours=24,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while job.status not in ENDED and time.monotonic() < deadline:
        time.sleep(0.1)
        job = client.batch.jobs.get(job_id=job.id)
    return job


def lines_of(client: Any, file_id: str) -> list[dict[str, Any]]:
    answer = client.files.download(file_id=file_id)
    return [json.loads(line) for line in answer.read().decode().splitlines()]


def main(base_url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with Mistral(api_key="mistral-key", server_url=base_url) as client:
        chat = [{"messages": [{"role": "user", "content": f"hello {i}"}]} for i in range(3)]
        uploaded = upload(client, chat)
        seen["upload"] = uploaded.model_dump(mode="json")
        seen["retrieve"] = client.files.retrieve(file_id=uploaded.id).model_dump(mode="json")
        job = run_job(client, uploaded.id, "mistral-small-latest", "/v1/chat/completions", "chat")
        seen["chat_job"] = job.model_dump(mode="json")
        seen["chat_lines"] = lines_of(client, job.output_file)
        listed = client.batch.jobs.list(metadata={"walk": "chat"}, status=["SUCCESS"])
        seen["listed"] = [j.id for j in listed.data or []]

        texts = [{"input": f"text {i}", "output_dimension": 8} for i in range(3)]
        embedded = upload(client, texts)
        job = run_job(client, embedded.id, "codestral-embed", "/v1/embeddings", "embed")
        seen["embed_job"] = job.model_dump(mode="json")
        seen["embed_lines"] = lines_of(client, job.output_file)

        started = client.batch.jobs.create(
            input_files=[uploaded.id], model="mistral-small-latest",
            endpoint="/v1/chat/completions", metadata={"walk": "cancel"},
        )  # fmt: skip
        seen["cancelled"] = client.batch.jobs.cancel(job_id=started.id).model_dump(mode="json")

        reply = client.chat.complete(
            model="mistral-small-latest", messages=[{"role": "user", "content": "hi"}]
        )
        seen["chat"] = reply.model_dump(mode="json")
        vectors = client.embeddings.create(
            model="codestral-embed", inputs=["text 0", "text 1"], output_dimension=8
        )
        seen["embeddings"] = vectors.model_dump(mode="json")
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
