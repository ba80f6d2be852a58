"""Near-duplicate rows of an embedding's output: pairs whose vectors' cosine similarity reaches
a threshold (the sample code location's downstream example of ``embedding()``)."""

import numpy as np
import polars as pl

from maple_engine.model import EMBEDDING_COLUMN

BLOCK = 2_048  # rows compared at a time: a BLOCK x rows float32 matrix, not rows x rows


def near_duplicate_pairs(table: pl.DataFrame, key: str, threshold: float = 0.95) -> pl.DataFrame:
    """``key_a``, ``key_b``, ``similarity`` for every pair of rows (a before b) whose vectors'
    cosine similarity is at least ``threshold``, most similar first; rows without a vector are
    left out. Memory: one block of ``BLOCK`` rows against all, not the full square."""
    rows = table.filter(pl.col(EMBEDDING_COLUMN).is_not_null())
    keys = rows.get_column(key)
    vectors = rows.get_column(EMBEDDING_COLUMN).to_numpy().astype(np.float32, copy=False)
    if vectors.ndim != 2 or len(vectors) < 2:
        return _pairs([], [], [], keys.dtype)
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    firsts, seconds, scores = [], [], []
    for start in range(0, len(vectors), BLOCK):
        similarity = vectors[start : start + BLOCK] @ vectors.T
        a, b = np.nonzero(similarity >= threshold)
        a += start
        later = b > a  # each pair once, never a row with itself
        firsts.append(a[later])
        seconds.append(b[later])
        scores.append(similarity[a[later] - start, b[later]])
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    return _pairs(keys.gather(first), keys.gather(second), np.concatenate(scores), keys.dtype)


def _pairs(a: object, b: object, score: object, dtype: pl.DataType) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"key_a": a, "key_b": b, "similarity": score},
        schema={"key_a": dtype, "key_b": dtype, "similarity": pl.Float32},
    )
    return frame.sort(["similarity", "key_a", "key_b"], descending=[True, False, False])
