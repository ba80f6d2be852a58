"""Parquet IO manager on dagster's UPathIOManager: one file per partition, local or S3.

Values are polars DataFrames (written as Parquet) or a ``merged`` output pointer (any object
with ``path``/``format``/``rows``), which is stored as a small JSON file; loading a pointer
gives downstream assets a lazy scan of the real output, so nothing large is read eagerly.
"""

import dataclasses
from typing import Any

import dagster as dg
import orjson
import polars as pl
import pyarrow.parquet as pq
from pydantic import Field
from upath import UPath

from maple_engine.inputs.sources import scan_output
from maple_engine.storage.s3 import ENVIRONMENT, S3Settings
from maple_engine.storage.storage import atomic_write, is_remote


class ParquetUPathIOManager(dg.UPathIOManager):
    extension: str = ".parquet"

    def __init__(self, base_path: UPath, s3: S3Settings = ENVIRONMENT) -> None:
        super().__init__(base_path=base_path)
        self.s3 = s3  # how the outputs that pointers name are reached

    def dump_to_path(self, context: dg.OutputContext, obj: Any, path: UPath) -> None:
        if dataclasses.is_dataclass(obj) and hasattr(obj, "path"):
            payload = orjson.dumps({"pointer": dataclasses.asdict(obj)})  # type: ignore[arg-type]
            with atomic_write(path.fs, path.with_suffix(".json").path) as handle:
                handle.write(payload)
            return
        if isinstance(obj, pl.LazyFrame):
            obj = obj.collect()
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(f"{context.asset_key}: expected a polars DataFrame, got {type(obj)}")
        with atomic_write(path.fs, path.path) as handle:
            pq.write_table(obj.to_arrow(), handle, compression="zstd")

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """A pointer's metadata ``path`` is the real output file, not the pointer's own."""
        if dataclasses.is_dataclass(obj) and hasattr(obj, "path") and not context.has_partition_key:
            path = self._get_path(context)
            self.make_directory(path.parent)
            self.dump_to_path(context=context, obj=obj, path=path)
            context.add_output_metadata({"path": dg.MetadataValue.path(str(obj.path))})
            return
        super().handle_output(context, obj)

    def get_metadata(self, context: dg.OutputContext, obj: Any) -> dict[str, Any]:
        """The stored frame's columns; each asset reports its own ``rows`` (the IO manager's
        would hide them: ``input_shards`` stores one row per shard, not per input row)."""
        if isinstance(obj, pl.DataFrame):
            return {"columns": obj.columns}
        return {}

    def load_from_path(self, context: dg.InputContext, path: UPath) -> Any:
        pointer = path.with_suffix(".json")
        if pointer.exists():
            target = orjson.loads(pointer.read_bytes())["pointer"]
            return scan_output(target["path"], self.s3)
        with path.open("rb") as handle:
            frame = pl.read_parquet(handle)
        return frame.lazy() if context.dagster_type.typing_type is pl.LazyFrame else frame

    def path_exists(self, path: UPath) -> bool:
        return bool(path.exists() or path.with_suffix(".json").exists())


class ParquetIOManager(dg.ConfigurableIOManagerFactory):  # type: ignore[type-arg]
    """Stores asset values as Parquet under the storage root (``<root>/<asset key>/...``)."""

    root: str = Field(description="Storage root: a local folder or s3://bucket/prefix.")

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetUPathIOManager:
        s3 = self.s3_settings()
        remote = is_remote(self.root)
        base = UPath(self.root, **s3.fsspec_options()) if remote else UPath(self.root)
        return ParquetUPathIOManager(base_path=base, s3=s3)

    def s3_settings(self) -> S3Settings:
        """How ``s3://`` is reached: here the AWS_* environment (``resources.s3_resources``
        has the variant that takes a dagster-aws ``S3Resource``)."""
        return ENVIRONMENT
