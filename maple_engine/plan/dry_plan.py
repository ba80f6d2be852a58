"""What a run would send, for ``--dry-run``: the input's requests minus the ones it would not send.

A run of a living enrichment sends only the rows whose request has no usable answer in the
response store (`maple_engine.storage.response_store`), and of identical new requests only the first
(`maple_engine.plan.versions`). A dry run that priced every row would overstate a rerun after a
small edit by orders of magnitude, so it makes the same decision without writing anything
under the storage root: while streaming the input it spills each row's request key, estimated
prompt tokens and encoded size to a temporary folder, one Parquet file per key bucket, then
looks each bucket up in the store on its own (memory stays flat, as in a real run).
"""

import dataclasses
import tempfile
from collections.abc import Callable, Iterator

import polars as pl

from maple_engine.model import KEY, ROW_ID
from maple_engine.storage.response_store import BUCKETS, ResponseStore, by_bucket
from maple_engine.storage.storage import Storage

TOKENS, SIZE = "_tokens", "_size"


@dataclasses.dataclass(frozen=True)
class SendPlan:
    """Of ``rows`` input rows: how many a run would send, their prompt tokens and bytes."""

    rows: int
    sent: int
    input_tokens: int
    bytes: int
    reused: int  # answered by the store (earlier runs)
    duplicates: int  # identical to a request this run sends


class _Spill:
    """Row id, key, tokens and size of every row, appended per key bucket (in a temp folder)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.parts: dict[str, int] = {}

    def add(self, frame: pl.DataFrame) -> None:
        for part in by_bucket(frame):
            bucket = str(part[KEY][0])[0]
            index = self.parts.get(bucket, 0)
            part.write_parquet(f"{self.folder}/{bucket}-{index:06d}.parquet")
            self.parts[bucket] = index + 1

    def scan(self, bucket: str) -> pl.LazyFrame | None:
        if bucket not in self.parts:
            return None
        return pl.scan_parquet(f"{self.folder}/{bucket}-*.parquet")


def plan_sends(
    storage: Storage,
    job: str,
    blocks: Iterator[pl.DataFrame],
    *,
    reuse: bool,
    retry_failed: bool,
    on_block: Callable[[pl.DataFrame], None] | None = None,
    sendable: Callable[[pl.DataFrame], pl.DataFrame] = lambda block: block,
) -> SendPlan:
    """Stream ``blocks`` (prepared rows with ROW_ID, KEY, ``_tokens``, ``_size``) and decide,
    bucket by bucket, which rows a run would send (of the ``sendable`` rows: an embedding's
    empty texts are never sent)."""
    store = ResponseStore(storage, job)
    with tempfile.TemporaryDirectory(prefix="maple-dry-") as folder:
        spill = _Spill(folder)
        rows = 0
        for block in blocks:
            if on_block is not None:
                on_block(block)
            spill.add(sendable(block).select(ROW_ID, KEY, TOKENS, SIZE))
            rows += block.height
        sent = tokens = size = reused = duplicates = 0
        for bucket in BUCKETS:
            staged = spill.scan(bucket)
            if staged is None:
                continue
            fresh = staged
            if reuse:
                known = store.usable_keys(bucket, retry_failed=retry_failed)
                fresh = staged.join(known, on=KEY, how="anti")
            first = fresh.sort(ROW_ID).unique(KEY, keep="first") if reuse else fresh
            counts = pl.collect_all(
                [
                    staged.select(pl.len()),
                    fresh.select(pl.len()),
                    first.select(pl.len(), pl.col(TOKENS).sum(), pl.col(SIZE).sum()),
                ]
            )
            total, new = counts[0].item(), counts[1].item()
            n, t, s = counts[2].row(0)
            sent, tokens, size = sent + n, tokens + int(t or 0), size + int(s or 0)
            reused += total - new
            duplicates += new - n
    return SendPlan(rows, sent, tokens, size, reused, duplicates)
