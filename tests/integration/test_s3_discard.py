"""A write to S3 that raises half-way commits nothing: every writer, against moto's S3 server.

fsspec's file uploads what it holds when its ``with`` block exits, even on an exception; the
writers go through ``maple_engine.storage.storage.atomic_write``, which aborts instead.
"""

import os
from collections.abc import Callable
from typing import IO, Any

import boto3
import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
import s3fs
from upath import UPath

from maple_engine.merge.merge import OutputTable, OutputWriter
from maple_engine.model import KEY, ROW_ID
from maple_engine.plan.versions import KeySpill
from maple_engine.storage.storage import Storage, atomic_write
from resources.io_manager import ParquetIOManager, ParquetUPathIOManager
from tests.conftest import BUCKET

FRAME = pl.DataFrame({ROW_ID: [1, 2], KEY: ["a" * 64, "b" * 64]})


class Boom(Exception):
    """The writer's failure half-way."""


def objects(prefix: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [obj["Key"] for obj in listed.get("Contents", [])]


class BrokenFrame(pl.DataFrame):
    def to_arrow(self, *args: Any, **kwargs: Any) -> Any:
        table = super().to_arrow()
        raise Boom(table.num_rows)


def half(handle: IO[bytes]) -> None:
    handle.write(b'{"half": ')
    raise Boom


def storage_open_write(root: str) -> None:
    with Storage(root).open_write("job/state/a.json") as handle:
        half(handle)


def storage_write_parquet(root: str) -> None:
    Storage(root).write_parquet("job/state/t.parquet", BrokenFrame(FRAME))


def output_writer(fmt: str) -> Callable[[str], None]:
    def write(root: str) -> None:
        with OutputWriter(f"{root}/out/enriched.{fmt}", fmt) as writer:
            writer.write(FRAME)
            raise Boom

    return write


def key_spill(root: str) -> None:
    with KeySpill(Storage(root), "job", 1) as spill:
        spill.add(FRAME)
        raise Boom


def io_manager(value: Any) -> Callable[[str], None]:
    def write(root: str) -> None:
        manager = ParquetIOManager(root=root).create_io_manager(dg.build_init_resource_context())
        assert isinstance(manager, ParquetUPathIOManager)
        context = dg.build_output_context(asset_key=dg.AssetKey(["numbers"]))
        with pytest.raises(Boom):
            manager.dump_to_path(context, value, manager._base_path / "numbers.parquet")
        raise Boom

    return write


WRITERS = {
    "storage.open_write": storage_open_write,
    "storage.write_parquet": storage_write_parquet,
    "output writer, parquet": output_writer("parquet"),
    "output writer, csv": output_writer("csv"),
    "key spill": key_spill,
    "io manager": io_manager(BrokenFrame(FRAME)),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_failed_write_leaves_nothing(s3: dict[str, str], name: str) -> None:
    with pytest.raises(Boom):
        WRITERS[name](f"s3://{BUCKET}/root")
    assert objects("root/") == []


def test_a_failed_write_keeps_the_old_object(s3: dict[str, str]) -> None:
    storage = Storage(f"s3://{BUCKET}/root")
    storage.write_json("job/state/a.json", {"whole": True})
    with pytest.raises(Boom):
        storage_open_write(storage.root)
    assert storage.read_json("job/state/a.json") == {"whole": True}


def test_a_failed_multipart_upload_is_aborted(s3: dict[str, str]) -> None:
    fs = s3fs.S3FileSystem(
        default_block_size=5 * 2**20, client_kwargs={"endpoint_url": s3["AWS_ENDPOINT_URL"]}
    )
    with pytest.raises(Boom), atomic_write(fs, f"{BUCKET}/root/big.bin") as handle:
        handle.write(os.urandom(12 * 2**20))  # two parts already uploaded
        raise Boom
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"])
    assert objects("root/") == []
    assert client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_a_finished_write_commits(s3: dict[str, str]) -> None:
    root = f"s3://{BUCKET}/root"
    with OutputWriter(f"{root}/out/enriched.parquet", "parquet") as writer:
        writer.write(FRAME)
    with Storage(root).open_read("out/enriched.parquet") as handle:
        assert pq.read_table(handle).num_rows == 2
    manager = ParquetIOManager(root=root).create_io_manager(dg.build_init_resource_context())
    context = dg.build_output_context(asset_key=dg.AssetKey(["numbers"]))
    pointer = OutputTable(path=f"{root}/out/enriched.parquet", format="parquet", rows=2)
    manager.dump_to_path(context, pointer, UPath(f"{root}/io/numbers.parquet"))
    assert sorted(objects("root/")) == ["root/io/numbers.json", "root/out/enriched.parquet"]
