"""Which rows the LLM labels to teach the classifier: chosen by their prompts' content, so a
rerun over the same or an edited table chooses (nearly) the same rows, and their answers come
from the response store."""

import numpy as np
import polars as pl
import polars_hash  # noqa: F401  (registers the ``chash`` expression namespace)

from maple_engine.inputs.templates import parse_template, render_expr

#: the column of each row's key: SHA-256 of its rendered prompt (stable across versions)
ROW_KEY = "distill_key"


def row_keys(frame: pl.DataFrame, template: str) -> pl.Series:
    """Each row's key: the SHA-256 of its rendered prompt, as hex."""
    rendered = render_expr(parse_template(template))
    hashed: pl.Expr = rendered.chash.sha2_256()  # type: ignore[attr-defined]
    return frame.select(hashed.alias(ROW_KEY)).to_series()


def sample_rows(keys: pl.Series, size: int) -> np.ndarray:
    """The row numbers of the sample: the ``size`` distinct prompts whose keys sort first
    (rows of the same prompt are in it together), in row order."""
    distinct = keys.unique().sort().head(size)
    chosen = keys.is_in(distinct.implode())
    return np.flatnonzero(chosen.to_numpy())
