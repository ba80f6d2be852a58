"""Fixtures shared by the integration and e2e tests: a live emulator, sample tables, and two S3
stores on 127.0.0.1: moto's server (the S3 API) and SeaweedFS (a real store, `tests.seaweedfs`;
the tests on it skip where it is not installed)."""

import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import polars as pl
import pytest
from moto.server import ThreadedMotoServer

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.provider_settings import settings_provider
from maple_engine.settings import Settings
from maple_engine.storage import exclusive, store_features
from tests.e2e.gateway_programs import crashed_programs
from tests.seaweedfs import MISSING, WEED, SeaweedFS, weed_server

TRICKY_ROWS = {
    "sku": ["A-1", "B-2", "C-3", "D-4", "E-5", "F-6"],
    "title": ["Crème brûlée", 'Say "cheese"', "Milk, whole", "Line\nbreak", None, "日本茶 🍵"],
    "description": ["naïve café", "", "a,b,c", 'He said "hi"\r\nbye', "null text", None],
    "price": ["1.50", "2", "3.0", None, "5", "6.25"],
}


_HOME = pytest.StashKey[tuple[str, str | None]]()  # the test home, and HOME before it


def pytest_configure(config: pytest.Config) -> None:
    """The tests never touch the user's home: a job on an S3 storage root keeps its ledger and
    Dagster home under ``~/.maple``, which every checkout on a machine shares (a branch's newer
    ledger revision there failed another branch's tests)."""
    home = tempfile.mkdtemp(prefix="maple-test-home-")
    config.stash[_HOME] = (home, os.environ.get("HOME"))
    os.environ["HOME"] = home


def pytest_unconfigure(config: pytest.Config) -> None:
    home, before = config.stash[_HOME]
    shutil.rmtree(home, ignore_errors=True)
    if before is not None:
        os.environ["HOME"] = before


class ServerCrashed(AssertionError):
    """A program the test started as its server (a model server, a gateway) died under it."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    """A test whose server died under it fails as that crash, whatever the job then saw (a
    refused connection is the crash's symptom, not a product failure)."""
    try:
        result = yield
    except (Exception, pytest.fail.Exception) as error:
        crashes = crashed_programs()
        if crashes:
            raise ServerCrashed("\n\n".join(crashes)) from error
        raise
    crashes = crashed_programs()
    if crashes:
        raise ServerCrashed("\n\n".join(crashes))
    return result


def env_provider(name: str, **fields: Any) -> Any:
    """Provider ``name`` with the API key and base URL the environment sets, built as ``maple``
    builds it (the engine's classes never read the environment themselves)."""
    return settings_provider(name, Settings.load(), None, fields)


@pytest.fixture
def emulator_server() -> Iterator[EmulatorServer]:
    """A live emulator on a free port whose batches finish at once."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        yield server


@pytest.fixture
def tricky_table() -> pl.DataFrame:
    """Unicode, quotes, commas, embedded newlines and nulls."""
    return pl.DataFrame(TRICKY_ROWS)


@pytest.fixture
def tricky_csv(tmp_path: Path, tricky_table: pl.DataFrame) -> Path:
    path = tmp_path / "tricky.csv"
    tricky_table.write_csv(path)
    return path


@pytest.fixture
def tricky_parquet(tmp_path: Path, tricky_table: pl.DataFrame) -> Path:
    path = tmp_path / "tricky.parquet"
    tricky_table.with_columns(pl.col("price").cast(pl.Float64)).write_parquet(path)
    return path


BUCKET = "maple-test"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An empty bucket ``BUCKET`` on a fresh moto server; the AWS variables point at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # moto keeps its buckets in process-wide memory: start every test from an empty S3.
    reset = urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).read()
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)
    yield env
    server.stop()


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[SeaweedFS]:
    """One SeaweedFS for the tests of this process (skips where it is not installed)."""
    if WEED is None:
        pytest.skip(MISSING)
    with weed_server() as server:
        yield server


@pytest.fixture(scope="session")
def open_seaweedfs() -> Iterator[SeaweedFS]:
    """A SeaweedFS that takes any request, signed or not: the upstream of the proxies that drop
    a signed header (`tests.s3_proxy`); its bucket ``BUCKET`` is there."""
    if WEED is None:
        pytest.skip(MISSING)
    with weed_server(auth=False) as server:
        server.fresh_bucket(BUCKET)
        yield server


@pytest.fixture
def seaweedfs(seaweedfs_server: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty bucket ``BUCKET`` on SeaweedFS; the AWS variables point at it (as ``s3`` does
    for moto)."""
    seaweedfs_server.fresh_bucket(BUCKET)
    env = seaweedfs_server.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture(params=["moto", "seaweedfs"])
def s3_store(request: pytest.FixtureRequest) -> dict[str, str]:
    """``s3`` on moto, then ``seaweedfs``: a test of what S3's semantics decide runs on both."""
    env: dict[str, str] = request.getfixturevalue("s3" if request.param == "moto" else "seaweedfs")
    return env


@pytest.fixture(autouse=True)
def _stores_probed_afresh() -> Iterator[None]:
    """What this process learnt of S3 stores (`maple_engine.storage.store_features`) is kept by
    endpoint: a later test may get the same port for another store."""
    yield
    store_features.forget()
    exclusive.forget()
