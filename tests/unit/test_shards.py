import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maple_engine.model import shard_key
from maple_engine.plan.shards import ShardCutter


def cut(blocks: list[list[int]], max_requests: int, max_bytes: int) -> list[list[int]]:
    """Run the cutter over blocks; return each shard's sizes in order."""
    cutter = ShardCutter(max_requests, max_bytes)
    shards: dict[int, list[int]] = {}
    for block in blocks:
        array = np.array(block, dtype=np.int64)
        for piece in cutter.feed(array):
            shards.setdefault(piece.shard, []).extend(block[piece.start : piece.stop])
    return [shards[k] for k in sorted(shards)]


def test_cuts_by_count_and_bytes_whichever_first() -> None:
    assert cut([[2, 2, 2, 2, 9, 1, 1, 1, 1], [5, 5, 5]], 3, 10) == [
        [2, 2, 2],
        [2],
        [9, 1],
        [1, 1, 1],
        [5, 5],
        [5],
    ]


def test_shard_keys_sort_in_order() -> None:
    keys = [shard_key(i) for i in (0, 9, 10, 199, 1000)]
    assert keys == sorted(keys)


def test_rejects_non_positive_limits() -> None:
    with pytest.raises(ValueError, match="positive"):
        ShardCutter(0, 10)


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(st.lists(st.integers(1, 50), max_size=30), max_size=6),
    max_requests=st.integers(1, 12),
    max_bytes=st.integers(50, 200),
)
def test_every_request_lands_once_in_order_within_limits(
    blocks: list[list[int]], max_requests: int, max_bytes: int
) -> None:
    shards = cut(blocks, max_requests, max_bytes)
    assert [s for shard in shards for s in shard] == [s for block in blocks for s in block]
    for index, shard in enumerate(shards):
        assert 0 < len(shard) <= max_requests
        assert sum(shard) <= max_bytes
        if index + 1 < len(shards):  # a shard only closes when the next request would not fit
            nxt = shards[index + 1][0]
            assert len(shard) == max_requests or sum(shard) + nxt > max_bytes
