"""``maple enrich --provider bedrock`` (storage root on moto's S3 server, the emulator as the
Bedrock endpoint) killed with SIGKILL after the input upload, then rerun: the same output, and no
record billed twice or job created twice (the kill after the job create is the conformance
suite's, ``tests/conformance``)."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import polars as pl
import pytest
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

MAPLE = str(Path(sys.executable).parent / "maple")
ROWS = 200
BUCKET = "maple-crash"


def run_job(work: Path, env: dict[str, str], crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in env.items() if not k.startswith("MAPLE_CRASH")}
    if crash:
        env["MAPLE_CRASH_AT"] = crash
    cmd = [
        MAPLE, "enrich", str(work / "items.parquet"), "--prompt", "Name {title}",
        "--model", "anthropic.claude-3-haiku-20240307-v1:0", "--provider", "bedrock",
        "--storage", f"s3://{BUCKET}/{work.name}", "--job", "crash",
        "--output", str(work / "out.parquet"), "--max-requests-per-batch", "100",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=240, check=False,
        start_new_session=True,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_upload"])  # after_create: tests/conformance
def test_kill_then_rerun_pays_nothing_twice(
    tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    s3_url = f"http://{host}:{port}"
    aws = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    urllib.request.urlopen(urllib.request.Request(f"{s3_url}/moto-api/reset", method="POST"))
    boto3.client("s3", endpoint_url=s3_url, **_keys(aws)).create_bucket(Bucket=BUCKET)
    titles = [f"thing {i}" for i in range(ROWS)]
    pl.DataFrame({"title": titles}).write_parquet(tmp_path / "items.parquet")
    config = EmulatorConfig(batch_seconds=0.3, s3_endpoint=s3_url, control_fail=0)
    try:
        with EmulatorServer(config) as server:
            env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
            role = "arn:aws:iam::123456789012:role/maple"
            env |= aws | {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ENDPOINT_URL_BEDROCK": server.url}
            env["MAPLE_BEDROCK_ROLE_ARN"] = role
            for key, value in aws.items():  # the emulator's S3 client, in this process
                monkeypatch.setenv(key, value)
            crashed = run_job(tmp_path, env, point)
            done = run_job(tmp_path, env, None)
            stats = server.stats()
    finally:
        moto.stop()
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_response"].to_list() == [f"echo: Name {t}" for t in titles]
    assert stats["batches_created"] == 2 and stats["requests_billed"] == ROWS
    assert stats["bodies_billed_twice"] == 0


def _keys(aws: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": aws["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": aws["AWS_SECRET_ACCESS_KEY"],
        "region_name": aws["AWS_DEFAULT_REGION"],
    }
