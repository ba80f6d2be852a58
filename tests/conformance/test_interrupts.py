"""The promises every provider keeps when a job is interrupted, each held on every case of
`CASES` (the long pass: a job run twice, or run while another command stops it):

b. a kill -9 right after a batch is created (``MAPLE_CRASH_AT=after_create``), then the same
   command: the rerun adopts the batch, nothing is billed twice. On a real-time name the point
   comes once the attempt's rows are answered and checkpointed: the rerun sends none again;
f. ``maple cancel`` stops a running job: the provider's batches are cancelled (a real-time
   attempt has none), the job ends stopped (exit 4) before every row is billed.
"""

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from emulator.server import EmulatorServer
from tests.conformance.cases import BUCKET, CASES, Case
from tests.conformance.conftest import AWS_KEYS, module_emulator
from tests.conformance.jobs import (
    JOB,
    environment,
    is_batch,
    job_args,
    ok,
    output,
    run,
    storage,
    with_known_failure,
)
from tests.conformance.test_promises import billed_once
from tests.e2e.cli import clean_env

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", [with_known_failure(c, "kill_9") for c in CASES])
def test_a_kill_9_after_the_create_then_the_same_command_pays_nothing_twice(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    args = job_args(case, tmp_path)
    killed = run(case, server.url, s3_url, *args, MAPLE_CRASH_AT="after_create")
    assert killed.returncode == -9, killed.stderr[-3000:]
    resumed = run(case, server.url, s3_url, *args)
    ok(resumed)
    assert output(tmp_path)["llm_status"].to_list() == ["succeeded"] * case.rows
    billed_once(server.stats(), case, case.rows)  # batches: the one made before the kill adopted


@pytest.fixture(scope="module")
def slow_server(s3_url: str) -> Iterator[EmulatorServer]:
    """An emulator whose batches take a minute: a job still waits on them when cancelled."""
    yield from module_emulator(s3_url, batch_seconds=60.0)


def submitted(case: Case, work: Path, s3_url: str) -> int:
    """The batches the job has recorded as submitted (``submission-1.json`` of its shards)."""
    if not case.on_s3:
        return len(list((work / "store").glob(f"{JOB}/state/*/submission-1.json")))
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name=AWS_KEYS["AWS_DEFAULT_REGION"])
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{work.name}/{JOB}/state/")
    return sum(1 for o in listed.get("Contents", []) if o["Key"].endswith("/submission-1.json"))


def started(case: Case, server: EmulatorServer, work: Path, s3_url: str) -> bool:
    """Every batch submitted, or a real-time job's first rows answered."""
    if is_batch(case):
        return submitted(case, work, s3_url) == case.batches
    return bool(server.stats()["requests_billed"] >= 2)


@pytest.mark.parametrize("case", [with_known_failure(c, "cancel") for c in CASES])
def test_maple_cancel_stops_a_running_job(
    case: Case, slow_server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    slow_server.reset()
    env = clean_env(**environment(case, slow_server.url, s3_url))
    # real time: a row every 3 s, so the cancel lands with rows unsent even when `maple cancel`
    # takes 10 s to start on a loaded machine (at a row a second all 12 were sent first)
    pace = () if is_batch(case) else ("--rpm", "20")
    command = [sys.executable, "-m", "maple_assets.cli", *job_args(case, tmp_path, "enrich", *pace)]
    running = subprocess.Popen(
        command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 90
        while not started(case, slow_server, tmp_path, s3_url):
            assert running.poll() is None, running.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        cancelled = run(
            case, slow_server.url, s3_url, "cancel", JOB, "--storage", storage(case, tmp_path)
        )
        _, stderr = running.communicate(timeout=120)
    finally:
        running.kill()
    ok(cancelled)
    assert f"cancelled {case.batches if is_batch(case) else 0} batch(es)" in cancelled.stdout
    assert running.returncode == 4, stderr[-3000:]  # 4: stopped early
    assert "stopped: cancelled with `maple cancel`" in stderr
    stats = slow_server.stats()
    assert stats["requests_billed"] < case.rows and stats["bodies_billed_twice"] == 0, stats
