"""A distilled job's vectors, read from its embedding job's output a slice of rows at a time:
the classifier scores ``SLICE_ROWS`` rows at once and training reads the sample's rows alone, so
no step holds every row's vector (at 200,000 rows of 256 dimensions that is 410 MB as float64)."""

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from maple_engine.distill.classifier import Classifier, Vectors

#: rows whose vectors are decoded and scored at once: 20,000 x 256 x 8 bytes = 41 MB
SLICE_ROWS = 20_000
_COLUMN = "llm_embedding"


class Embeddings:
    """The embedding output ``frame`` (a lazy scan with ``llm_embedding``, in row order)."""

    def __init__(self, frame: pl.LazyFrame) -> None:
        self.frame = frame.select(_COLUMN)

    @functools.cached_property
    def present(self) -> np.ndarray:
        """Which rows have a vector (the embedding job answered them)."""
        found = self.frame.select(pl.col(_COLUMN).is_not_null()).collect()
        return found.to_series().to_numpy()

    def take(self, rows: np.ndarray) -> Vectors:
        """The vectors of ``rows`` (row numbers), in their order."""
        wanted = pl.Series("row", rows, dtype=pl.UInt32)
        found = (
            self.frame.with_row_index("row").filter(pl.col("row").is_in(wanted.implode())).collect()
        )
        by_row = dict(zip(found["row"].to_list(), range(found.height), strict=True))
        return matrix(found[_COLUMN])[[by_row[int(r)] for r in rows]]

    def slices(self) -> Iterator[Vectors]:
        """Every row's vector, ``SLICE_ROWS`` rows at a time (zeros where there is none)."""
        for start in range(0, len(self.present), SLICE_ROWS):
            yield matrix(self.frame.slice(start, SLICE_ROWS).collect()[_COLUMN])

    def score(self, classifier: Classifier) -> tuple[list[Any], np.ndarray]:
        """Each row's label and the classifier's confidence in it, a slice at a time."""
        labels: list[Any] = []
        confidence = np.empty(len(self.present))
        for i, vectors in enumerate(self.slices()):
            found, sure = classifier.score(vectors)
            labels.extend(found)
            confidence[i * SLICE_ROWS : i * SLICE_ROWS + len(found)] = sure
        return labels, confidence


def matrix(column: pl.Series) -> Vectors:
    """A column of vectors as a matrix (zeros where a row has none)."""
    present = column.is_not_null().to_numpy()
    width = column.dtype.size if isinstance(column.dtype, pl.Array) else 0
    vectors = np.zeros((len(column), width))
    if present.any():
        vectors[present] = column.filter(column.is_not_null()).to_numpy().astype(float)
    return vectors
