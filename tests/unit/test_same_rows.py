"""The same-rows check compares row digests batch by batch, in order, whatever the batches."""

import numpy as np
import polars as pl
import pytest

from maple_assets.graph import checks
from maple_assets.graph.checks import compare_rows, same_rows_result


def batches(values: list[int], sizes: list[int]):
    start = 0
    for size in sizes:
        yield np.array(values[start : start + size], dtype=np.uint64)
        start += size
    assert start == len(values)


@pytest.mark.parametrize(
    ("theirs", "ours", "first"),
    [
        (list(range(10)), list(range(10)), None),
        (list(range(10)), [*range(7), 99, 8, 9], 7),
        (list(range(10)), list(range(9)), 9),  # ours ends first
        (list(range(9)), list(range(10)), 9),  # theirs ends first
        (list(range(10)), [99, *range(1, 9)], 0),  # the first difference wins, not the length
        ([], [], None),
        ([], [1], 0),
    ],
)
@pytest.mark.parametrize(("cut_theirs", "cut_ours"), [(1, 10), (3, 4), (10, 1), (4, 3)])
def test_compare_rows_finds_the_first_difference_across_misaligned_batches(
    theirs, ours, first, cut_theirs, cut_ours
):
    def sizes(n: int, cut: int) -> list[int]:
        return [min(cut, n - i) for i in range(0, n, cut)]

    got = compare_rows(
        batches(theirs, sizes(len(theirs), cut_theirs)), batches(ours, sizes(len(ours), cut_ours))
    )
    assert (got.theirs, got.ours, got.first_different) == (len(theirs), len(ours), first)
    assert got.same == (first is None)


def test_same_rows_result_reads_in_batches(monkeypatch):
    monkeypatch.setattr(checks, "DIGEST_ROWS", 3)
    table = pl.DataFrame({"sku": [f"s{i}" for i in range(10)], "n": list(range(10))})
    merged = table.with_columns(pl.lit("answer").alias("llm_response"))
    assert same_rows_result(table.lazy(), merged.lazy()).passed
    edited = merged.with_columns(
        pl.when(pl.col("n") == 6).then(pl.lit("x")).otherwise(pl.col("sku")).alias("sku")
    )
    result = same_rows_result(table.lazy(), edited.lazy())
    assert not result.passed
    assert result.metadata["first_different_row"].value == 6
    assert result.metadata["input_rows"].value == 10
