"""boto3's ``bedrock`` client against the emulator, which reads inputs from and writes outputs to
moto's S3 server on 127.0.0.1 (``--s3-endpoint``)."""

import base64
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import orjson
import pytest
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

BUCKET = "bedrock-test"
ROLE = "arn:aws:iam::123456789012:role/maple-bedrock"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
DONE = {"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired"}


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


def record(record_id: str, text: str) -> dict[str, Any]:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    }
    return {"recordId": record_id, "modelInput": body}


def put_input(s3_url: str, key: str, count: int) -> str:
    lines = b"".join(orjson.dumps(record(f"R{i:010d}", f"item {i}")) + b"\n" for i in range(count))
    boto3.client("s3", endpoint_url=s3_url).put_object(Bucket=BUCKET, Key=key, Body=lines)
    return f"s3://{BUCKET}/{key}"


def create(client: Any, source: str, name: str = "job-1", **extra: Any) -> str:
    answer = client.create_model_invocation_job(
        jobName=name,
        roleArn=ROLE,
        modelId=MODEL,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": source}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        **extra,
    )
    return str(answer["jobArn"])


def wait(client: Any, arn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        job: dict[str, Any] = client.get_model_invocation_job(jobIdentifier=arn)
        if job["status"] in DONE:
            return job
        assert time.monotonic() < deadline, job["status"]
        time.sleep(0.05)


def bedrock(server: EmulatorServer) -> Any:
    return boto3.client("bedrock", endpoint_url=server.url, region_name="us-east-1")


def test_job_round_trip_through_s3(s3_url: str) -> None:
    config = EmulatorConfig(batch_seconds=0.3, s3_endpoint=s3_url, bedrock_min_records=2)
    with EmulatorServer(config) as server:
        client = bedrock(server)
        arn = create(client, put_input(s3_url, "in/records.jsonl", 3), clientRequestToken="t1")
        assert arn.startswith("arn:aws:bedrock:") and "model-invocation-job/" in arn
        again = create(client, f"s3://{BUCKET}/in/records.jsonl", clientRequestToken="t1")
        assert again == arn  # the idempotency token returns the same job
        listed = client.list_model_invocation_jobs(nameContains="job-")
        assert [j["jobArn"] for j in listed["invocationJobSummaries"]] == [arn]
        job = wait(client, arn)
        assert job["status"] == "Completed" and job["successRecordCount"] == 3
        stats = server.stats()
    s3 = boto3.client("s3", endpoint_url=s3_url)
    job_id = arn.rsplit("/", 1)[-1]
    out = s3.get_object(Bucket=BUCKET, Key=f"out/{job_id}/records.jsonl.out")["Body"].read()
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [line["recordId"] for line in lines] == [f"R{i:010d}" for i in range(3)]
    assert lines[0]["modelOutput"]["content"][0]["text"] == "echo: item 0"
    manifest = s3.get_object(Bucket=BUCKET, Key=f"out/{job_id}/manifest.json.out")["Body"].read()
    assert orjson.loads(manifest)["successRecordCount"] == 3
    assert stats["requests_billed"] == 3 and stats["batches_created"] == 1


def test_stop_limits_and_validation(s3_url: str) -> None:
    config = EmulatorConfig(
        batch_seconds=2, s3_endpoint=s3_url, bedrock_min_records=2, bedrock_max_jobs=1
    )
    with EmulatorServer(config) as server:
        client = bedrock(server)
        source = put_input(s3_url, "in/a.jsonl", 4)
        arn = create(client, source)
        with pytest.raises(ClientError) as quota:
            create(client, source, name="job-2")
        assert quota.value.response["Error"]["Code"] == "ServiceQuotaExceededException"
        client.stop_model_invocation_job(jobIdentifier=arn)
        assert wait(client, arn)["status"] == "Stopped"
        few = create(client, put_input(s3_url, "in/one.jsonl", 1), name="job-3")
        failed = wait(client, few)
        assert failed["status"] == "Failed" and "between 2 and" in failed["message"]
        with pytest.raises(ClientError) as missing:
            client.get_model_invocation_job(jobIdentifier="abcdefabcdef")
        assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_without_an_s3_endpoint_create_is_refused(
    emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with pytest.raises(ClientError) as refused:
        create(bedrock(emulator), f"s3://{BUCKET}/in/x.jsonl")
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "--s3-endpoint" in refused.value.response["Error"]["Message"]


def test_a_titan_embedding_job_gives_the_real_time_vectors(s3_url: str) -> None:
    texts = ["red shirt", "blue hat", "", "green sock"]
    inputs = [{"inputText": t, "dimensions": 256, "normalize": True} for t in texts]
    inputs.append({"inputText": "odd size", "dimensions": 100})
    lines = b"".join(
        orjson.dumps({"recordId": f"R{i}", "modelInput": body}) + b"\n"
        for i, body in enumerate(inputs)
    )
    boto3.client("s3", endpoint_url=s3_url).put_object(Bucket=BUCKET, Key="in/t.jsonl", Body=lines)
    config = EmulatorConfig(batch_seconds=0.3, s3_endpoint=s3_url, bedrock_min_records=2)
    with EmulatorServer(config) as server:
        client = bedrock(server)
        answer = client.create_model_invocation_job(
            jobName="titan-1",
            roleArn=ROLE,
            modelId="amazon.titan-embed-text-v2:0",
            inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/t.jsonl"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        )
        job = wait(client, answer["jobArn"])
        stats = server.stats()
        openai_route = urllib.request.Request(
            f"{server.url}/v1/embeddings",
            data=orjson.dumps({"model": "m", "input": "blue hat", "dimensions": 256}),
            headers={"authorization": "Bearer k", "content-type": "application/json"},
        )
        live = orjson.loads(urllib.request.urlopen(openai_route).read())
    assert job["status"] == "Completed" and job["successRecordCount"] == 3
    job_id = answer["jobArn"].rsplit("/", 1)[-1]
    key = f"out/{job_id}/t.jsonl.out"
    out = boto3.client("s3", endpoint_url=s3_url).get_object(Bucket=BUCKET, Key=key)
    got = [orjson.loads(line) for line in out["Body"].read().splitlines()]
    output = got[1]["modelOutput"]
    assert len(output["embedding"]) == 256 and output["inputTextTokenCount"] == 2
    assert output["embedding"] == live["data"][0]["embedding"]  # one function, every route
    assert abs(sum(v * v for v in output["embedding"]) - 1.0) < 1e-5
    assert got[2]["error"]["errorCode"] == 400 and "inputText" in got[2]["error"]["errorMessage"]
    assert "256, 512, 1024" in got[4]["error"]["errorMessage"]
    assert stats["requests_billed"] == 3  # one per text embedded


def test_claude_on_bedrock_is_held_to_bedrocks_file_limits_not_anthropics(s3_url: str) -> None:
    """A 3.9 MB image (under Anthropic's 5 MB), six PDFs (Bedrock takes five a message) and a
    URL source (Bedrock fetches none) each fail their record; one small PDF is answered."""
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 2_900_000  # about 3.9 MB base64-encoded
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"

    def block(kind: str, mime: str, data: bytes) -> dict[str, Any]:
        encoded = base64.b64encode(data).decode()
        return {"type": kind, "source": {"type": "base64", "media_type": mime, "data": encoded}}

    contents = {
        "big-image": [block("image", "image/png", png)],
        "six-pdfs": [block("document", "application/pdf", pdf)] * 6,
        "a-url": [{"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}],
        "one-pdf": [block("document", "application/pdf", pdf)],
    }
    records = []
    for record_id, parts in contents.items():
        body = record(record_id, "")
        body["modelInput"]["messages"][0]["content"] = [*parts, {"type": "text", "text": "x"}]
        records.append(body)
    lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
    boto3.client("s3", endpoint_url=s3_url).put_object(Bucket=BUCKET, Key="in/f.jsonl", Body=lines)
    config = EmulatorConfig(batch_seconds=0.1, s3_endpoint=s3_url, bedrock_min_records=2)
    with EmulatorServer(config) as server:
        client = bedrock(server)
        arn = create(client, f"s3://{BUCKET}/in/f.jsonl")
        wait(client, arn)
    job_id = arn.rsplit("/", 1)[-1]
    s3 = boto3.client("s3", endpoint_url=s3_url)
    out = s3.get_object(Bucket=BUCKET, Key=f"out/{job_id}/f.jsonl.out")["Body"].read()
    errors = {
        line["recordId"]: (line.get("error") or {}).get("errorMessage", "")
        for line in map(orjson.loads, out.splitlines())
    }
    assert "3,750,000 bytes per file" in errors["big-image"], errors
    assert "over the limit of 5" in errors["six-pdfs"], errors
    assert "file bytes only" in errors["a-url"], errors
    assert errors["one-pdf"] == "", errors
