"""A Parquet file read in row order, ``n`` rows at a time, whatever its row groups' sizes."""

from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq


class RowStream:
    """The rows of an open Parquet file, handed out in order; holds one row group at most."""

    def __init__(self, handle: IO[bytes], columns: list[str] | None = None) -> None:
        self._handle = handle
        self._batches = pq.ParquetFile(handle).iter_batches(columns=columns)
        self._ahead: pa.Table | None = None

    def take(self, n: int) -> pa.Table | None:
        """The next ``n`` rows (fewer where the file ends; None once it has ended)."""
        parts = []
        while n > 0:
            if self._ahead is None or not self._ahead.num_rows:
                batch = next(self._batches, None)
                if batch is None:
                    break
                self._ahead = pa.Table.from_batches([batch])
            parts.append(self._ahead.slice(0, n))
            n -= parts[-1].num_rows
            self._ahead = self._ahead.slice(parts[-1].num_rows)
        return pa.concat_tables(parts) if parts else None

    def close(self) -> None:
        self._handle.close()
