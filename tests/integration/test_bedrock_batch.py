"""The Bedrock batch provider end to end: storage root on moto's S3 server, the emulator as the
Bedrock endpoint (reading inputs from and writing outputs to that S3), through ``maple enrich``
and through Dagster's sensor path, with faults, orphans, limits and the local-root refusal."""

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.binding import job_decorations, provider_key
from maple_assets.cli.commands import main
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.providers.bedrock.batch import BedrockBatchProvider
from tests.conftest import env_provider
from tests.integration.test_graph import run_graph

BUCKET = "maple-bedrock"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
ROLE = "arn:aws:iam::123456789012:role/maple-bedrock"


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    env = {
        "AWS_ENDPOINT_URL_S3": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MAPLE_BEDROCK_ROLE_ARN": ROLE,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


def bedrock_emulator(
    s3_url: str, monkeypatch: pytest.MonkeyPatch, **config: object
) -> EmulatorServer:
    settings: dict[str, object] = {"batch_seconds": 0.2, "s3_endpoint": s3_url, **config}
    server = EmulatorServer(EmulatorConfig(**settings))  # type: ignore[arg-type]
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK", server.url)
    return server


def table(path: Path, rows: int) -> Path:
    frame = pl.DataFrame(
        {"sku": [f"S-{i}" for i in range(rows)], "title": [f"t{i}" for i in range(rows)]}
    )
    frame.write_parquet(path)
    return path


@pytest.mark.slow  # ~15-20 s: a Bedrock job end to end on moto's S3
def test_enrich_on_s3(s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, sent = 250, 240  # shards of 120, 120 and 10: the last is under Bedrock's minimum
    with bedrock_emulator(s3_url, monkeypatch) as server:
        args = [
            "enrich", str(table(tmp_path / "in.parquet", rows)), "--prompt", "Name {title}",
            "--model", MODEL, "--provider", "bedrock", "--storage", f"s3://{BUCKET}/root",
            "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", "120",
            "--poll-interval", "0.1", "--quiet",
        ]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 3, result.output  # the small shard's rows failed
        stats = server.stats()
    out = pl.read_parquet(tmp_path / "out.parquet")
    done, small = out.head(sent), out.tail(rows - sent)
    assert done["llm_response"].to_list() == [f"echo: Name t{i}" for i in range(sent)]
    assert done["llm_batch_id"].str.contains("model-invocation-job/").all()
    assert done["llm_batch_id"].n_unique() == 2
    assert (done["llm_cost_usd"] > 0).all()
    assert small["llm_failure_class"].to_list() == ["invalid_request"] * (rows - sent)
    assert small["llm_error"].str.contains("needs at least 100 records").all()
    assert (small["llm_cost_usd"] == 0).all()
    assert stats["requests_billed"] == sent and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 2
    keys = [
        o["Key"]
        for o in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="root/")["Contents"]
    ]
    assert sum(k.endswith(".jsonl.out") for k in keys) == 2
    assert sum(k.endswith("manifest.json.out") for k in keys) == 2


def test_local_root_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAPLE_BEDROCK_ROLE_ARN", ROLE)
    args = [
        "enrich", str(table(tmp_path / "in.parquet", 3)), "--prompt", "{title}",
        "--model", MODEL, "--provider", "bedrock", "--storage", str(tmp_path / "store"),
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "needs an S3 storage root" in result.output and "--storage s3://" in result.output


def payload(provider: BedrockBatchProvider, rows: int, shard: str) -> ShardPayload:
    spec = RequestSpec(MODEL, system="Be brief.", params={"max_tokens": 64})
    frame = pl.DataFrame({"t": [f"text {i}" for i in range(rows)]})
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("job", shard, 1, spec.model, requests)


def test_limits_orphans_and_stop(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with bedrock_emulator(s3_url, monkeypatch, batch_seconds=3, bedrock_min_records=2):
        provider = env_provider(
            "bedrock", storage_root=f"s3://{BUCKET}/r", min_records=2, max_jobs=2
        )
        small = provider.submit(payload(provider, 1, "s00000"))  # under the minimum: not sent
        state = provider.poll([small])[small.batch_id]
        assert state.ended and state.status == "failed" and "at least 2 records" in state.errors[0]
        assert provider.results(small, state).is_empty()
        first = provider.submit(payload(provider, 3, "s00001"))
        second = provider.submit(payload(provider, 4, "s00002"))
        found = {s.shard: s for s in provider.find_orphans("job")}
        assert found["s00001"].batch_id == first.batch_id and found["s00001"].adopted
        assert found["s00002"].content_hash == second.content_hash
        assert provider.find_orphans("other") == []
        provider.cancel(first)  # frees a slot: the third job waits for it, then goes in
        quick = provider.model_copy(update={"slot_poll_s": 0.05})
        third = quick.submit(payload(provider, 2, "s00003"))
        states = provider.poll([first, second, third])
        assert states[first.batch_id].status in {"cancelling", "cancelled"}


@pytest.mark.slow  # ~25 s; Bedrock end to end on S3 stays in the default suite
def test_dagster_sensor_with_faults(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = {"server_error": 0.2, "expired": 0.3}
    with bedrock_emulator(s3_url, monkeypatch, fail=faults, seed=2, bedrock_min_records=1) as srv:
        frame = pl.DataFrame({"n": [str(i) for i in range(20)]})

        @dg.asset
        def items() -> pl.DataFrame:
            return frame

        en = enrichment(
            name="bedrock_items",
            source=items,
            prompt="item {n}",
            model=MODEL,
            provider="bedrock",
            max_requests_per_batch=10,
        )
        root = f"s3://{BUCKET}/dagster"
        resources = maple_resources([en], storage_root=root)
        resources[provider_key("bedrock")] = env_provider(
            "bedrock", storage_root=root, min_records=1
        )
        with dg.instance_for_test() as instance:
            run_graph(en, [items], resources, instance)
        stats = srv.stats()
    merged = pl.read_parquet(f"{root}/bedrock_items/output/merged.parquet",
                             storage_options={"aws_endpoint_url": s3_url, "aws_allow_http": "true",
                                              "aws_region": "us-east-1"})  # fmt: skip
    assert merged["n"].to_list() == frame["n"].to_list()
    assert merged["llm_status"].to_list() == ["succeeded"] * 20
    assert merged["llm_attempts"].max() > 1  # type: ignore[operator]
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == 20


def test_a_gateways_header_reaches_every_bedrock_call(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--header`` rides on every call of the Bedrock client (added before the request is
    signed): the emulator, requiring it as a gateway would, answers each one; without it the
    gateway's refusal is one line, exit 2, nothing sent."""
    required = ("x-gateway-key",)
    args = [
        "enrich", str(table(tmp_path / "in.parquet", 200)), "--prompt", "Name {title}",
        "--model", MODEL, "--provider", "bedrock", "--storage", f"s3://{BUCKET}/gw",
        "--output", str(tmp_path / "out.parquet"), "--max-requests-per-batch", "100",
        "--poll-interval", "0.1", "--quiet",
    ]  # fmt: skip
    header = ["--header", "x-gateway-key: gw-bedrock-secret"]
    with bedrock_emulator(s3_url, monkeypatch, required_headers=required) as server:
        refused = CliRunner().invoke(main, args)
        before = server.stats()
        result = CliRunner().invoke(main, [*args, *header], catch_exceptions=False)
        stats = server.stats()
    assert refused.exit_code == 2, refused.output
    assert "The x-gateway-key header is required" in refused.output
    assert before["batches_created"] == 0 and before["requests_billed"] == 0
    assert result.exit_code == 0, result.output
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * 200
    assert stats["requests_billed"] == 200 and stats["bodies_billed_twice"] == 0
    assert "gw-bedrock-secret" not in result.output + refused.output


def test_a_teams_bedrock_jobs_carry_its_tags(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The team attribution map's ``bedrock_tags`` go on CreateModelInvocationJob (AWS cost
    allocation groups spend by them); a job of a team the map lacks has none."""
    teams = '{"teams": {"catalog": {"bedrock_tags": {"team": "catalog", "cost-center": "42"}}}}'
    with bedrock_emulator(s3_url, monkeypatch, bedrock_min_records=2) as server:
        provider = env_provider("bedrock", storage_root=f"s3://{BUCKET}/t", min_records=2)
        provider = provider.model_copy(update={"team_attribution": teams})
        catalog = provider.decorated(job_decorations(provider, team="catalog"))
        other = provider.decorated(job_decorations(provider, team="other"))
        tagged = catalog.submit(payload(provider, 2, "s00000"))
        plain = other.submit(payload(provider, 2, "s00001"))
        client = boto3.client("bedrock", endpoint_url=server.url)
        assert client.list_tags_for_resource(resourceARN=tagged.batch_id)["tags"] == [
            {"key": "team", "value": "catalog"},
            {"key": "cost-center", "value": "42"},
        ]
        assert client.list_tags_for_resource(resourceARN=plain.batch_id)["tags"] == []
