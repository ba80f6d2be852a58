"""Pass 1 of a rerun keeps the changed rows it rendered, so that pass 2 need not read and
render the input again (`maple_engine.plan.changed_rows.KeptRows`); when it cannot hold every
row pass 2 sends, pass 2 reads the input."""

from pathlib import Path

import numpy as np
import polars as pl

from maple_engine.model import ROW_ID
from maple_engine.plan.changed_rows import KeptRows


def block(first: int, rows: int) -> pl.DataFrame:
    ids = list(range(first, first + rows))
    return pl.DataFrame({ROW_ID: ids, "title": [f"item {i}" for i in ids], "_size": ids})


def test_the_rows_to_send_come_back_in_row_order_with_their_types() -> None:
    send = np.zeros(100, dtype=bool)
    send[[3, 4, 41, 97]] = True
    carried = np.zeros(100, dtype=bool)
    carried[[0, 1, 2]] = True  # not kept, and not sent: no matter
    with KeptRows() as kept:
        for first in (3, 40, 90):
            kept.add(block(first, 10 if first != 90 else 8))
        blocks = kept.sent(send, carried)
        assert blocks is not None
        got = pl.concat(list(blocks))
    assert got[ROW_ID].to_list() == [3, 4, 41, 97]
    assert got.schema == block(0, 1).schema
    assert got["title"].to_list() == ["item 3", "item 4", "item 41", "item 97"]


def test_a_row_to_send_that_was_not_kept_sends_pass_two_to_the_input() -> None:
    send = np.zeros(20, dtype=bool)
    send[[2, 12]] = True
    carried = np.zeros(20, dtype=bool)
    carried[:10] = True  # row 2 was carried over, not rendered: its answer is not in the store
    with KeptRows() as kept:
        kept.add(block(10, 10))
        assert kept.sent(send, carried) is None


def test_past_its_limit_it_keeps_nothing_and_leaves_no_file(tmp_path: Path) -> None:
    send = np.ones(30, dtype=bool)
    none = np.zeros(30, dtype=bool)
    with KeptRows(limit=15) as kept:
        kept.add(block(0, 10))
        kept.add(block(10, 10))  # 20 > 15: gives up
        kept.add(block(20, 10))
        assert kept.sent(send, none) is None
        folder = Path(kept._folder.name)
        assert list(folder.iterdir()) == []
    assert not folder.exists()  # removed on exit


def test_a_block_it_cannot_write_makes_it_give_up() -> None:
    odd = pl.DataFrame({ROW_ID: [0], "thing": pl.Series([object()], dtype=pl.Object)})
    with KeptRows() as kept:
        kept.add(odd)
        kept.add(block(1, 3))
        assert kept.sent(np.ones(4, dtype=bool), np.zeros(4, dtype=bool)) is None
