"""The merged output is written on a second thread while the next frame is made: the rows
arrive in order, and a failure on either side leaves no output file."""

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maple_engine.merge.merge import write_merged


def frames(count: int, fail_at: int | None = None) -> Iterator[pl.DataFrame]:
    for i in range(count):
        if i == fail_at:
            raise RuntimeError("the merge failed while making a frame")
        yield pl.DataFrame({"n": list(range(i * 1000, (i + 1) * 1000))})


def test_frames_are_written_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    table = write_merged(frames(30), str(out), "parquet")
    assert table.rows == 30_000
    assert pl.read_parquet(out)["n"].to_list() == list(range(30_000))


def test_a_failed_frame_leaves_no_output(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError, match="while making a frame"):
        write_merged(frames(10, fail_at=5), str(out), "parquet")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_is_raised_and_leaves_no_output(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    bad = [pl.DataFrame({"n": [1, 2]}), pl.DataFrame({"n": ["not a number"]})]
    with pytest.raises(pa.ArrowInvalid):
        write_merged(iter([*bad, pl.DataFrame({"n": [3]})]), str(out), "parquet")
    assert list(tmp_path.iterdir()) == []


def test_only_columns_that_repeat_get_dictionary_pages(tmp_path: Path) -> None:
    """Statuses, the model and a category of the input repeat: dictionary pages. Answers and
    titles are unique text: plain pages (a dictionary would be filled only to be dropped). A
    nested column gets none, and every value reads back as written."""
    rows = 5_000
    first = pl.DataFrame(
        {
            "title": [f"item {i}" for i in range(rows)],
            "aisle": [f"aisle {i % 12}" for i in range(rows)],
            "meta": [{"n": i} for i in range(rows)],
            "llm_response": [f"brand {i}, {i % 7} g" for i in range(rows)],
            "llm_status": ["succeeded"] * (rows - 1) + ["failed"],
            "llm_model": ["gpt-4o-mini"] * rows,
        }
    )
    later = first.with_columns(pl.format("other {}", pl.col("title")).alias("aisle"))
    out = tmp_path / "out.parquet"
    write_merged(iter([first, later]), str(out), "parquet")
    metadata = pq.ParquetFile(out).metadata
    pages = {}
    for group in range(metadata.num_row_groups):
        chunks = metadata.row_group(group)
        for i in range(chunks.num_columns):
            column = chunks.column(i)
            pages.setdefault(column.path_in_schema, []).append(column.has_dictionary_page)
    assert pages["llm_status"] == pages["llm_model"] == pages["aisle"] == [True, True]
    assert pages["title"] == pages["llm_response"] == pages["meta.n"] == [False, False]
    assert pl.read_parquet(out).equals(pl.concat([first, later]))
