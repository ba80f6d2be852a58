"""The emulator's Mistral batch jobs over HTTP: a job of ``{"custom_id", "body"}`` lines runs
on the OpenAI batch engine (billed and counted there) and answers as Mistral does (upper-case
statuses, ``output_file``, ``*_requests``, a failed line's body as a JSON string); the list
pages by number and filters by metadata; a cancel is requested, then done; OpenAI's batch routes
and Mistral's do not see each other's batches."""

import time
from typing import Any

import httpx
import orjson
import pytest

from emulator.server import EmulatorServer
from emulator.testing import MakeEmulator, chat_body

KEY = {"Authorization": "Bearer mistral-key"}
MODEL = "mistral-small-latest"


def upload(client: httpx.Client, lines: list[dict[str, Any]]) -> str:
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    files = {"file": ("input.jsonl", data, "application/jsonl")}
    answer = client.post("/v1/files", files=files, data={"purpose": "batch"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def create(client: httpx.Client, file_id: str, **more: Any) -> dict[str, Any]:
    job = {"input_files": [file_id], "model": MODEL, "endpoint": "/v1/chat/completions", **more}
    answer = client.post("/v1/batch/jobs", json=job)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def until_ended(client: httpx.Client, job_id: str) -> dict[str, Any]:
    for _ in range(100):
        job = dict(client.get(f"/v1/batch/jobs/{job_id}").json())
        if job["status"] in {"SUCCESS", "FAILED", "TIMEOUT_EXCEEDED", "CANCELLED"}:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end")


def lines_of(client: httpx.Client, file_id: str) -> list[dict[str, Any]]:
    content = client.get(f"/v1/files/{file_id}/content").content
    return [orjson.loads(raw) for raw in content.splitlines() if raw.strip()]


def lines(count: int) -> list[dict[str, Any]]:
    """Mistral's lines: no method or url; the body names no model (the job's applies)."""
    bodies = [chat_body(f"item {i}") for i in range(count)]
    return [
        {"custom_id": f"r{i}", "body": {k: v for k, v in body.items() if k != "model"}}
        for i, body in enumerate(bodies)
    ]


def test_a_job_runs_its_lines_and_answers_as_mistral(emulator: EmulatorServer) -> None:
    with httpx.Client(base_url=emulator.url, headers=KEY, timeout=10) as client:
        made = create(client, upload(client, lines(3)), metadata={"maple_job": "j"})
        assert (made["status"], made["model"], made["total_requests"]) == ("QUEUED", MODEL, 0)
        job = until_ended(client, made["id"])
        out = lines_of(client, job["output_file"])
        openai_view = client.get(f"/v1/batches/{made['id']}")
    assert job["status"] == "SUCCESS" and job["error_file"] is None
    assert (job["total_requests"], job["succeeded_requests"], job["failed_requests"]) == (3, 3, 0)
    assert [line["custom_id"] for line in out] == ["r0", "r1", "r2"]
    assert out[0]["response"]["body"]["choices"][0]["message"]["content"] == "echo: item 0"
    assert out[0]["response"]["body"]["model"] == MODEL
    assert emulator.stats()["requests_billed"] == 3
    assert openai_view.status_code == 404  # a Mistral job is no OpenAI batch


def test_a_failed_lines_body_is_a_json_string(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(fail={"invalid_request": 1.0}) as server,
        httpx.Client(base_url=server.url, headers=KEY, timeout=10) as client,
    ):
        job = until_ended(client, create(client, upload(client, lines(2)))["id"])
        errors = lines_of(client, job["error_file"])
    assert job["status"] == "SUCCESS" and job["failed_requests"] == 2
    body = errors[0]["response"]["body"]
    assert isinstance(body, str) and orjson.loads(body)["object"] == "error"


def test_the_list_pages_by_number_and_filters_by_metadata(emulator: EmulatorServer) -> None:
    with httpx.Client(base_url=emulator.url, headers=KEY, timeout=10) as client:
        file_id = upload(client, lines(1))
        made = [create(client, file_id, metadata={"maple_job": f"j{i % 2}"}) for i in range(3)]
        page = client.get("/v1/batch/jobs", params={"page": 0, "page_size": 2}).json()
        rest = client.get("/v1/batch/jobs", params={"page": 1, "page_size": 2}).json()
        mine = client.get("/v1/batch/jobs", params={"metadata": '{"maple_job": "j0"}'}).json()
        bad = client.get("/v1/batch/jobs", params={"metadata": "j0"})
    newest_first = [job["id"] for job in reversed(made)]
    assert [job["id"] for job in page["data"] + rest["data"]] == newest_first
    assert page["total"] == 3
    assert [job["id"] for job in mine["data"]] == [made[2]["id"], made[0]["id"]]
    assert bad.status_code == 422


@pytest.mark.parametrize(
    "change",
    [{"model": ""}, {"endpoint": "/v1/responses"}, {"timeout_hours": 0}, {"input_files": []}],
)
def test_a_job_mistral_would_refuse_is_a_422(emulator: EmulatorServer, change: Any) -> None:
    with httpx.Client(base_url=emulator.url, headers=KEY, timeout=10) as client:
        job = {"input_files": [upload(client, lines(1))], "model": MODEL,
               "endpoint": "/v1/chat/completions", **change}  # fmt: skip
        answer = client.post("/v1/batch/jobs", json=job)
    assert answer.status_code == 422


def test_a_cancel_is_requested_then_done(make_emulator: MakeEmulator) -> None:
    with (
        make_emulator(batch_seconds=0.5) as server,
        httpx.Client(base_url=server.url, headers=KEY, timeout=10) as client,
    ):
        made = create(client, upload(client, lines(2)))
        asked = client.post(f"/v1/batch/jobs/{made['id']}/cancel").json()
        job = until_ended(client, made["id"])
        again = client.post(f"/v1/batch/jobs/{made['id']}/cancel")
    assert asked["status"] == "CANCELLATION_REQUESTED"
    assert job["status"] == "CANCELLED" and again.status_code == 400
