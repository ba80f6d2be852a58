from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from maple_engine.errors import ConfigError
from maple_engine.inputs.sources import iter_blocks


def test_csv_blocks_read_like_polars(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(
        'id,text,note\n1,"multi\nline, with comma",""\n2,,"say ""hi"""\n3,ünïcode 🍵,x\n',
        encoding="utf-8",
    )
    blocks = list(iter_blocks(str(path)))
    expected = pl.read_csv(path, infer_schema=False)
    assert_frame_equal(pl.concat(blocks), expected)
    assert expected["note"].to_list() == ["", 'say "hi"', "x"]  # quoted empty stays ""
    assert expected["text"][1] is None  # an empty field is null


def test_parquet_is_read_block_by_block(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    frame = pl.DataFrame({"n": range(10_000), "s": [f"row {i}" for i in range(10_000)]})
    frame.write_parquet(path, row_group_size=1_000)
    blocks = list(iter_blocks(str(path), rows=2_500))
    assert len(blocks) >= 4 and max(b.height for b in blocks) <= 2_500
    assert_frame_equal(pl.concat(blocks), frame)


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ConfigError, match="Cannot read the input"):
        list(iter_blocks(str(path)))
