"""The official ``mistralai`` SDK (pinned, test-only, in its own virtualenv: ``.ci/run``
installs it and exports ``MAPLE_TEST_MISTRALAI_PYTHON``) against the emulator's Mistral routes:
files, batch jobs (chat and embeddings: create, poll, list by metadata and status, download,
cancel), real-time chat and embeddings, each answer read through the SDK's own response models
(``scripts/mistral_sdk_walk.py``). Without the variable the test skips, naming it."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

PYTHON = os.environ.get("MAPLE_TEST_MISTRALAI_PYTHON", "")
WALK = Path(__file__).parents[2] / "scripts" / "mistral_sdk_walk.py"


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    if not PYTHON or not Path(PYTHON).exists():
        pytest.skip("the mistralai SDK is not installed (.ci/run; MAPLE_TEST_MISTRALAI_PYTHON)")
    # a job ends in about 0.3 s: long enough to cancel one just created
    with EmulatorServer(EmulatorConfig(batch_seconds=0.3, control_fail=0)) as server:
        walked = subprocess.run(
            [PYTHON, str(WALK), server.url], capture_output=True, text=True, timeout=120,
            check=False, env={k: v for k, v in os.environ.items() if not k.startswith("MISTRAL")},
        )  # fmt: skip
        stats = server.stats()
    assert walked.returncode == 0, walked.stderr[-4000:]
    return {**json.loads(walked.stdout), "stats": stats}


def test_files_and_a_chat_job_read_through_the_sdks_models(seen: dict[str, Any]) -> None:
    upload, retrieved = seen["upload"], seen["retrieve"]
    assert (upload["purpose"], upload["sample_type"], upload["source"]) == (
        "batch", "batch_request", "upload"
    )  # fmt: skip
    assert retrieved["id"] == upload["id"] and retrieved["deleted"] is False
    job = seen["chat_job"]
    assert (job["status"], job["model"], job["endpoint"]) == (
        "SUCCESS", "mistral-small-latest", "/v1/chat/completions"
    )  # fmt: skip
    assert (job["total_requests"], job["succeeded_requests"], job["failed_requests"]) == (3, 3, 0)
    assert job["metadata"] == {"walk": "chat"} and job["input_files"] == [upload["id"]]
    replies = {line["custom_id"]: line["response"]["body"] for line in seen["chat_lines"]}
    assert {k: b["choices"][0]["message"]["content"] for k, b in replies.items()} == {
        str(i): f"echo: hello {i}" for i in range(3)
    }
    assert seen["listed"] == [job["id"]]


def test_an_embeddings_job_takes_mistrals_body_and_gives_its_vectors(
    seen: dict[str, Any],
) -> None:
    job = seen["embed_job"]
    assert (job["status"], job["endpoint"], job["model"]) == (
        "SUCCESS", "/v1/embeddings", "codestral-embed"
    )  # fmt: skip
    batch = {
        line["custom_id"]: line["response"]["body"]["data"][0]["embedding"]
        for line in seen["embed_lines"]
    }
    assert all(len(vector) == 8 for vector in batch.values())  # its output_dimension
    live = [item["embedding"] for item in seen["embeddings"]["data"]]
    np.testing.assert_allclose(live, [batch["0"], batch["1"]])  # the same text, the same vector
    assert seen["embeddings"]["usage"]["prompt_tokens"] > 0


def test_a_job_is_cancelled_and_real_time_chat_answers(seen: dict[str, Any]) -> None:
    assert seen["cancelled"]["status"] in {"CANCELLATION_REQUESTED", "CANCELLED"}
    assert seen["chat"]["choices"][0]["message"]["content"] == "echo: hi"
    assert seen["stats"]["bodies_billed_twice"] == 0
