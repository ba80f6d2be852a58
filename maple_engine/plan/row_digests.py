"""A digest per input row of the columns its request is made from, kept by each version.

A version cut from a file writes ``versions/<n>/digests.parquet``: one 64-bit digest per input
row, in row order, of the values of the template's columns (and the image column; a file
column's by its files' names and bytes, not their paths, so a file rewritten with the same
bytes leaves its row's digest as it was). The next
version of the same settings compares its rows with those at the same row ids: a row whose
digest is unchanged has the request, and so the request key, it had then, so its key is taken
from the earlier version's key spill instead of rendering and hashing the row again. Only the
other rows (edited, appended, or moved by an insertion or deletion above them) are rendered.

The digests are written after the key spill is complete and removed before it is written again,
so a version's digests exist only beside its whole key spill (a crash between versions leaves the
last complete pair). They are used only by a version of the same settings fingerprint, polars
version (its hash is stable within one version only) and column types; otherwise every row is
rendered, as without them.
"""

import contextlib
import dataclasses
from typing import IO, Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from maple_engine.inputs.file_reads import FileReads
from maple_engine.inputs.files import content_identities
from maple_engine.inputs.templates import parse_template, template_columns
from maple_engine.model import ROW_ID
from maple_engine.plan.versions import Mask, marked
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.row_stream import RowStream
from maple_engine.storage.storage import Storage

DIGEST = "digest"
_SCHEMA = pa.schema([(DIGEST, pa.uint64())])
_META = b"maple.digests"
_NONE = np.empty(0, np.uint64)
Digests = np.ndarray[Any, np.dtype[np.uint64]]
#: Versions looked at for digests (each a lookup, a request on S3): the previous one has them
#: unless its cut failed or was killed.
LOOK_BACK = 8


def digest_columns(spec: JobSpec) -> list[str]:
    """The input columns a row's request is rendered from."""
    columns = template_columns(parse_template(spec.template))
    more = [c for c in (spec.image_column, *spec.file_columns) if c and c not in columns]
    return [*columns, *dict.fromkeys(more)]  # a column once


def row_digests(
    block: pl.DataFrame,
    columns: list[str],
    spec: JobSpec | None = None,
    reads: FileReads | None = None,
) -> Digests:
    """One 64-bit digest per row of ``block``'s ``columns`` (nulls and types included); with
    ``spec``'s file columns, of its files' names and bytes, not their paths
    (`maple_engine.inputs.files.content_identities`, its files read through ``reads``)."""
    if not columns:
        return np.zeros(block.height, np.uint64)
    if spec is not None:
        block = content_identities(block, spec, reads)
    return block.select(pl.struct(columns).hash(seed=0)).to_series().to_numpy()


def stamp(spec: JobSpec, schema: pl.Schema) -> dict[str, Any]:
    """What the digests depend on besides the values: settings, polars, the columns' types."""
    columns = digest_columns(spec)
    return {
        "fingerprint": spec.fingerprint(),
        "polars": pl.__version__,
        "columns": {c: str(schema[c]) for c in columns if c in schema},
    }


class DigestWriter:
    """Writes a version's digests in row order; they are committed only by a clean exit."""

    def __init__(self, storage: Storage, spec: JobSpec, number: int) -> None:
        self.storage = storage
        self.spec = spec
        self.columns = digest_columns(spec)
        self.key = JobLayout(spec.name).version_digests(number)
        self._stack = contextlib.ExitStack()
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> "DigestWriter":
        self.storage.delete(self.key)  # before the key spill it stands for is written again
        self._stack.__enter__()
        return self

    def add(self, block: pl.DataFrame, digests: Digests) -> None:
        """The digests of the next ``block`` of input rows."""
        if self._writer is None:
            meta = {_META: orjson.dumps(stamp(self.spec, block.schema))}
            handle: IO[bytes] = self._stack.enter_context(self.storage.open_write(self.key))
            schema = _SCHEMA.with_metadata(meta)
            # random 64-bit digests: neither compression nor dictionary pages pay
            self._writer = pq.ParquetWriter(
                handle, schema, compression="none", use_dictionary=False
            )
            self._stack.callback(self._writer.close)
        self._writer.write_table(pa.table({DIGEST: pa.array(digests, pa.uint64())}, _SCHEMA))

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)


@dataclasses.dataclass(frozen=True)
class Earlier:
    """An earlier version whose digests stand for this one's rows: its number, and the types
    of the columns they were made from."""

    number: int
    columns: dict[str, str]


def earlier_digests(storage: Storage, spec: JobSpec, number: int) -> Earlier | None:
    """The latest of the ``LOOK_BACK`` versions before ``number`` with digests, if made with
    these settings and this polars."""
    layout = JobLayout(spec.name)
    for earlier in range(number - 1, max(number - 1 - LOOK_BACK, 0), -1):
        key = layout.version_digests(earlier)
        if not storage.exists(key):
            continue
        with storage.open_read(key) as handle:
            meta = pq.read_schema(handle).metadata or {}
        made = orjson.loads(meta.get(_META, b"{}"))
        if (made.get("fingerprint"), made.get("polars")) != (spec.fingerprint(), pl.__version__):
            return None
        return Earlier(earlier, made.get("columns") or {})
    return None


class AlignedDigests:
    """An earlier version's digests, handed out in row order ``n`` at a time."""

    def __init__(self, storage: Storage, job: str, number: int) -> None:
        self._rows = RowStream(storage.open_read(JobLayout(job).version_digests(number)))

    def take(self, n: int) -> Digests:
        """The next ``n`` digests (fewer where the earlier input ended)."""
        rows = self._rows.take(n)
        return rows.column(0).to_numpy() if rows is not None else _NONE

    def close(self) -> None:
        self._rows.close()


def unchanged(digests: Digests, earlier: Digests | None) -> Mask:
    """Which rows have the digest the earlier version's row of the same id had (none without
    an earlier version)."""
    same = np.zeros(len(digests), dtype=bool)
    if earlier is not None:
        same[: len(earlier)] = digests[: len(earlier)] == earlier
    return same


def carried_keys(
    storage: Storage, job: str, number: int, bucket: str, carried: Mask
) -> pl.DataFrame | None:
    """The earlier version's spilled (row id, key) pairs of one bucket for the ``carried`` rows
    (a mask over this version's row ids)."""
    key = JobLayout(job).version_keys(number, bucket)
    if not storage.exists(key):
        return None
    spilled = storage.read_parquet(key)
    keep = marked(spilled.get_column(ROW_ID).to_numpy(), carried)
    return spilled.filter(pl.Series(keep)) if keep.any() else None
