"""Token counts of billed replies that reported none: a Gemini embedding reply may carry no
``usageMetadata``, and some OpenAI-compatible servers send no ``usage``. Booked at 0 they would
cost $0; instead each such row's tokens are estimated from its own text the way pre-flight
estimates a request (about 4 characters a token, `maple_engine.inputs.tokens`), its output from
the reply's text, and the row is marked ``tokens_estimated``."""

from collections.abc import Callable

import polars as pl

from maple_engine.inputs.tokens import prompt_tokens_expr, text_tokens_expr, token_columns
from maple_engine.model import ROW_ID
from maple_engine.spec import JobSpec

#: ``estimate(rows)``: for rows (``ROW_ID``, ``response``) whose reply reported no usage, their
#: estimated ``input_tokens`` and ``output_tokens`` by ``ROW_ID``
Estimate = Callable[[pl.DataFrame], pl.DataFrame]


def text_estimate(spec: JobSpec, read: Callable[[list[str]], pl.DataFrame]) -> Estimate:
    """The estimate for ``spec``'s rows; ``read(columns)`` gives those input columns (and
    ``ROW_ID``) of the rows the attempt sent (a shard's, a canary's sample)."""

    def estimate(rows: pl.DataFrame) -> pl.DataFrame:
        columns = [ROW_ID, *token_columns(spec)]
        source = read(columns).join(rows.select(ROW_ID), on=ROW_ID, how="semi")
        prompt = source.select(ROW_ID, prompt_tokens_expr(spec, spec.provider).alias("in"))
        replies = rows.select(
            ROW_ID,
            (text_tokens_expr(pl.col("response")) if spec.kind.replies else pl.lit(0))
            .cast(pl.Int64)
            .alias("out"),
        )
        return prompt.join(replies, on=ROW_ID, how="inner")

    return estimate


def with_estimates(frame: pl.DataFrame, estimate: Estimate | None) -> pl.DataFrame:
    """``frame`` (an attempt's rows joined with the provider's lines) with ``tokens_estimated``
    marking the billed rows whose reply reported no usage, their tokens estimated."""
    gap = pl.col("billed").fill_null(False) & pl.col("input_tokens").is_null()
    marked = frame.with_columns(gap.alias("tokens_estimated"))
    if estimate is None or not marked["tokens_estimated"].any():
        return marked
    guessed = estimate(marked.filter(pl.col("tokens_estimated")).select(ROW_ID, "response"))
    return (
        marked.join(guessed, on=ROW_ID, how="left", maintain_order="left")
        .with_columns(
            pl.coalesce("input_tokens", "in").alias("input_tokens"),
            pl.coalesce("output_tokens", "out").alias("output_tokens"),
        )
        .drop("in", "out")
    )
