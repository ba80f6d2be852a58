"""The start-up probe of an S3 store (`maple_engine.storage.store_features`, `probe.check_store`)
decides against real servers: moto and SeaweedFS honour conditional writes and range reads;
SeaweedFS behind a proxy that drops ``If-None-Match`` (or ``Range``) does not, and is refused in
one line naming it, unless the ledger's PostgreSQL database keeps the exclusive creates."""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from maple_engine.errors import ConfigError
from maple_engine.inputs.sources import input_schema
from maple_engine.ledger.create_locks import create_locks
from maple_engine.storage.leases import Lease
from maple_engine.storage.probe import check_readable, check_store
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import Storage
from maple_engine.storage.store_features import StoreLacks, probe_root
from tests.conftest import BUCKET
from tests.integration.test_costs_postgres import pg_url, server_url
from tests.s3_proxy import dropping
from tests.seaweedfs import SeaweedFS

__all__ = ["pg_url", "server_url"]  # fixtures
ROOT = f"s3://{BUCKET}/root"
NO_CONDITIONAL_WRITES = "does not honour conditional writes (a second PutObject with If-None-Match"


def settings(endpoint: str) -> S3Settings:
    return S3Settings(endpoint_url=endpoint, access_key_id="testing", secret_access_key="testing")


@pytest.fixture
def store_without(
    request: pytest.FixtureRequest, open_seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """SeaweedFS behind a proxy dropping the headers ``request.param`` (comma-separated); the
    AWS variables point at the proxy, whose URL is yielded."""
    with dropping(open_seaweedfs.endpoint, *request.param.split(",")) as proxy:
        for key, value in {**open_seaweedfs.env(), "AWS_ENDPOINT_URL": proxy.url}.items():
            monkeypatch.setenv(key, value)
        yield proxy.url


def test_moto_and_seaweedfs_honour_conditional_writes_and_range_reads(
    s3_store: dict[str, str],
) -> None:
    found = probe_root(ROOT, settings(s3_store["AWS_ENDPOINT_URL"]))
    assert found.lacks() == [], found
    assert check_store(ROOT, "The storage root") is None
    assert not any(".maple-probe" in key for key in Storage(ROOT).list_tree(""))


@pytest.mark.parametrize("store_without", ["If-None-Match"], indirect=True)
def test_a_store_that_overwrites_is_refused_in_one_line_naming_it(store_without: str) -> None:
    with pytest.raises(StoreLacks) as refused:
        check_store(ROOT, "The storage root")
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(f"The storage root '{ROOT}': the S3 store {store_without} ")
    assert NO_CONDITIONAL_WRITES in line and "range reads" not in line
    assert "(AWS S3, SeaweedFS or MinIO)" in line and "MAPLE_COST_DB" in line
    # nothing may be created on it exclusively, whoever asks (a process that skipped start-up)
    with pytest.raises(StoreLacks, match="conditional writes"):
        Storage(f"{ROOT}/job").create_exclusive("driver/00000001.json", b"{}")


@pytest.mark.parametrize("store_without", ["Range"], indirect=True)
def test_a_store_without_range_reads_is_refused_naming_it_not_the_input(
    store_without: str,
) -> None:
    with pytest.raises(StoreLacks) as refused:
        check_store(ROOT, "The storage root")
    line = str(refused.value)
    assert f"the S3 store {store_without} does not honour range reads (a GET of bytes" in line
    assert "answered 200 with 29 bytes, not 206 Partial Content with 5" in line
    assert "conditional writes" not in line and "MAPLE_COST_DB" not in line
    source = f"{ROOT}/items.csv"
    Storage(ROOT).write_bytes("items.csv", b"title\nthing 1\nthing 2\n")
    for check in (lambda: check_readable(source, "The input"), lambda: input_schema(source)):
        with pytest.raises(StoreLacks) as refused:
            check()
        line = str(refused.value)
        assert line.startswith(f"The input '{source}': the S3 store {store_without} ")
        assert "range reads" in line and "Give a readable" not in line


@pytest.mark.parametrize("store_without", ["If-None-Match,Range"], indirect=True)
def test_a_store_lacking_both_is_refused_naming_both(store_without: str) -> None:
    """As rclone's ``serve s3`` (1.75) is: the ledger would not make up for its range reads."""
    with pytest.raises(StoreLacks) as refused:
        check_store(ROOT, "The storage root")
    line = str(refused.value)
    assert f"the S3 store {store_without} {NO_CONDITIONAL_WRITES}" in line
    assert ") nor range reads (a GET of bytes 6-10 answered 200" in line
    assert line.endswith("honours them (AWS S3, SeaweedFS or MinIO).")


def test_the_store_is_probed_once_per_root_in_a_process(
    open_seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    with dropping(open_seaweedfs.endpoint) as proxy:
        for key, value in {**open_seaweedfs.env(), "AWS_ENDPOINT_URL": proxy.url}.items():
            monkeypatch.setenv(key, value)
        check_store(ROOT, "The storage root")
        probed = proxy.forwarded
        assert probed >= 4  # two puts, a ranged GET, a delete
        check_store(f"{ROOT}/", "The storage root")
        Storage(ROOT).create_exclusive("a.json", b"{}")
        assert proxy.forwarded == probed + 1  # the create alone


@pytest.mark.postgres
@pytest.mark.parametrize("store_without", ["If-None-Match"], indirect=True)
def test_the_ledgers_postgresql_keeps_exclusive_creates_the_store_cannot(
    store_without: str, pg_url: str
) -> None:
    locks = create_locks(pg_url)
    assert locks is not None and create_locks("sqlite:///ledger.sqlite") is None
    note = check_store(ROOT, "The storage root", locks=locks)
    assert note is not None and "\n" not in note
    assert note.startswith(f"The S3 store {store_without} does not honour conditional writes")
    assert (
        f"exclusive creates under {ROOT} (leases, batch claims) are kept in the ledger's " in note
    )
    assert "PostgreSQL database postgresql+psycopg2://" in note
    storage = Storage(ROOT)
    with ThreadPoolExecutor(max_workers=6) as pool:
        wins = list(pool.map(lambda i: storage.create_exclusive("race", b"%d" % i), range(12)))
    assert wins.count(True) == 1
    assert storage.read_bytes("race") == b"%d" % wins.index(True)
    first, second = Lease(storage, "job/driver", "first"), Lease(storage, "job/driver", "second")
    assert first.acquire() and not second.acquire()
    first.release()
    assert second.acquire() and second.generation == 2
    storage.delete("race")  # the object, not the database, says what exists
    assert storage.create_exclusive("race", b"again")


@pytest.mark.parametrize("store_without", ["Range"], indirect=True)
def test_the_ledger_cannot_stand_in_for_range_reads(store_without: str) -> None:
    locks = create_locks("postgresql+psycopg2://maple@127.0.0.1:9/none")  # never reached
    with pytest.raises(StoreLacks, match="does not honour range reads"):
        check_store(ROOT, "The storage root", locks=locks)


def test_a_local_root_is_not_probed(tmp_path: Path) -> None:
    assert check_store(str(tmp_path), "The storage root") is None
    assert issubclass(StoreLacks, ConfigError)  # exit 2, before anything is spent
