"""S3 settings from dagster-aws's ``S3Resource`` instead of the environment.

The storage root is on moto's S3 server, but no AWS_* variable tells the process where it is or
which credentials to use: the endpoint, region and credentials (as ``dg.EnvVar``) come from the
``S3Resource`` given to ``maple_resources``. Each resource instance carries its settings: the
process holds none, so two storages in one process may reach two S3 services.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import dagster as dg
import orjson
import polars as pl
import pytest
from dagster_aws.s3 import S3Resource

from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import Storage
from resources.s3_resources import S3StorageResource
from tests.conftest import BUCKET
from tests.integration.test_graph import run_graph


@pytest.fixture
def s3_only_from_resource(
    s3: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[S3Resource]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("T_S3_KEY", s3["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("T_S3_SECRET", s3["AWS_SECRET_ACCESS_KEY"])
    yield S3Resource(
        endpoint_url=s3["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id=dg.EnvVar("T_S3_KEY"),
        aws_secret_access_key=dg.EnvVar("T_S3_SECRET"),
    )


@pytest.mark.slow  # the whole graph on moto: about 20 s
def test_the_graph_runs_on_s3_configured_by_an_s3_resource(
    s3: dict[str, str],
    s3_only_from_resource: S3Resource,
    tmp_path: Path,
    emulator_server: EmulatorServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    source = tmp_path / "in.csv"
    pl.DataFrame({"name": [f"n{i}" for i in range(7)]}).write_csv(source)
    en = enrichment(
        name="viaresource",
        source=str(source),
        prompt="hi {name}",
        model="gpt-4o-mini",
        provider="emulator",
        max_requests_per_batch=3,
    )
    root = f"s3://{BUCKET}/root"
    resources = maple_resources([en], storage_root=root, s3=s3_only_from_resource)
    # nothing in the environment says where the bucket is or who may read it
    assert not {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(os.environ)
    with dg.instance_for_test() as instance:
        launched = run_graph(en, [], resources, instance)
    assert any(key.startswith("viaresource:merged:") for key in launched)
    client = boto3.client(
        "s3",
        endpoint_url=s3["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="root/viaresource/")
    names = {obj["Key"] for obj in listed.get("Contents", [])}
    assert "root/viaresource/state/merged.json" in names
    assert emulator_server.stats()["bodies_billed_twice"] == 0
    info = orjson.loads(
        client.get_object(Bucket=BUCKET, Key="root/viaresource/state/merged.json")["Body"].read()
    )
    body = client.get_object(Bucket=BUCKET, Key=info["path"].split(f"{BUCKET}/", 1)[1])["Body"]
    data = body.read()
    merged = pl.read_csv(data) if info["path"].endswith(".csv") else pl.read_parquet(data)
    assert merged.height == 7 and merged["llm_status"].to_list() == ["succeeded"] * 7


def test_s3_settings_map_to_fsspec_and_polars_options() -> None:
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region_name="eu-west-1",
        access_key_id="AK",
        secret_access_key="SK",
        session_token="TK",
    )
    fs = settings.fsspec_options()
    assert fs["client_kwargs"] == {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    assert (fs["key"], fs["secret"], fs["token"]) == ("AK", "SK", "TK")
    pl_opts = settings.polars_options()
    assert pl_opts is not None
    assert pl_opts["aws_endpoint_url"] == "http://127.0.0.1:9"
    assert pl_opts["aws_allow_http"] == "true"
    assert (pl_opts["aws_access_key_id"], pl_opts["aws_session_token"]) == ("AK", "TK")
    assert "SK" not in repr(settings) and "AK" not in repr(settings)


def test_each_storage_reaches_s3_with_its_own_settings(
    s3: dict[str, str], s3_only_from_resource: S3Resource
) -> None:
    """A storage built from the resource reaches the bucket; one built beside it in the same
    process, with the environment's settings (none here), still has none: nothing is shared."""
    root = f"s3://{BUCKET}/own"
    with dg.build_resources(
        {"maple_storage": S3StorageResource(root=root, s3=s3_only_from_resource)}
    ) as built:
        storage = built.maple_storage.storage()
    storage.write_json("job/a.json", {"a": 1})
    assert storage.read_json("job/a.json") == {"a": 1}
    assert storage.s3.endpoint() == s3["AWS_ENDPOINT_URL"]
    assert Storage(root).s3.endpoint() is None  # the environment's: no endpoint set
    assert Storage(root).s3 == S3Settings()
