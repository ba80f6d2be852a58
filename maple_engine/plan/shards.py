"""Shard planning: cut a stream of requests into shards by request count AND encoded bytes.

Pure logic (numpy only): the asset graph feeds it the encoded size of each request, block by
block, and gets back where each shard starts and ends. A shard closes when the next request
would break either limit, whichever comes first.
"""

import dataclasses
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt


@dataclasses.dataclass
class Piece:
    """Rows ``start:stop`` of the current block belong to shard ``shard``; ``closes`` ends it."""

    shard: int
    start: int
    stop: int
    closes: bool


class ShardCutter:
    """Streams blocks of per-request byte sizes and yields the shard pieces they fall into."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        if max_requests < 1 or max_bytes < 1:
            raise ValueError("shard limits must be positive")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.shard = 0
        self.count = 0
        self.bytes = 0

    def feed(self, sizes: npt.NDArray[np.int64]) -> Iterator[Piece]:
        """Pieces of this block; sizes larger than the byte limit are the caller's to reject."""
        start = 0
        n = len(sizes)
        while start < n:
            room_requests = self.max_requests - self.count
            cumulative = np.cumsum(sizes[start : start + room_requests])
            fits = int(np.searchsorted(cumulative, self.max_bytes - self.bytes, side="right"))
            if fits == 0 and self.count == 0:
                fits = 1  # an oversize single request still gets its own shard
            stop = start + fits
            full = self.count + fits == self.max_requests or stop < min(n, start + room_requests)
            if fits:
                self.count += fits
                self.bytes += int(cumulative[fits - 1])
                yield Piece(self.shard, start, stop, closes=full)
            if full or fits == 0:
                self._next()
            start = stop

    def _next(self) -> None:
        self.shard += 1
        self.count = 0
        self.bytes = 0

    @property
    def open_shard(self) -> int | None:
        """The shard still open after the last block (it closes at end of input)."""
        return self.shard if self.count else None
