"""Fixtures shared by the integration and e2e tests: a live emulator and sample tables."""

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

TRICKY_ROWS = {
    "sku": ["A-1", "B-2", "C-3", "D-4", "E-5", "F-6"],
    "title": ["Crème brûlée", 'Say "cheese"', "Milk, whole", "Line\nbreak", None, "日本茶 🍵"],
    "description": ["naïve café", "", "a,b,c", 'He said "hi"\r\nbye', "null text", None],
    "price": ["1.50", "2", "3.0", None, "5", "6.25"],
}


@pytest.fixture
def emulator_server() -> Iterator[EmulatorServer]:
    """A live emulator on a free port whose batches finish at once."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        yield server


@pytest.fixture
def tricky_table() -> pl.DataFrame:
    """Unicode, quotes, commas, embedded newlines and nulls."""
    return pl.DataFrame(TRICKY_ROWS)


@pytest.fixture
def tricky_csv(tmp_path: Path, tricky_table: pl.DataFrame) -> Path:
    path = tmp_path / "tricky.csv"
    tricky_table.write_csv(path)
    return path


@pytest.fixture
def tricky_parquet(tmp_path: Path, tricky_table: pl.DataFrame) -> Path:
    path = tmp_path / "tricky.parquet"
    tricky_table.with_columns(pl.col("price").cast(pl.Float64)).write_parquet(path)
    return path
