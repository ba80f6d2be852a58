"""The distilled job's output, made a slice of rows at a time: every input row in order, its
LLM answer where the LLM answered it, else the classifier's label, with where each label came
from (``llm_source``) and the classifier's confidence in its own label (``llm_confidence``: null
where no classifier scored the row)."""

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import orjson
import polars as pl

from maple_engine.collect.responses import NOT_SENT
from maple_engine.distill.embeddings import SLICE_ROWS
from maple_engine.distill.plan import Decision, embedding_job
from maple_engine.distill.reports import DistillReport, report_of
from maple_engine.distill.rounds import Round
from maple_engine.distill.sample import ROW_KEY
from maple_engine.label_field import LabelField, label_field
from maple_engine.spec import JobSpec

SOURCE, CONFIDENCE = "llm_source", "llm_confidence"
_ANSWERED = {"llm_response", "llm_parsed", "llm_status", "llm_model"}


@dataclasses.dataclass
class Written:
    """What the output's frames held, counted as they are made."""

    rows: int = 0
    failed: int = 0


def distilled_table(
    spec: JobSpec,
    rows: pl.DataFrame,
    answers: pl.DataFrame,
    last: Round,
    spent: Callable[[str], float],
) -> tuple[Iterator[pl.DataFrame], Written, DistillReport]:
    """The job's output after its ``last`` round (``rows``: the input, keyed; ``answers``:
    the LLM job's output), made ``SLICE_ROWS`` rows at a time as the frames are read, their
    tally (complete once they are), and what the run measured (``spent``: a job's spend,
    every run's)."""
    report = report_of(
        last.classifier, spec.distill_agreement, last.decision, answers, len(rows),
        embedding_cost_usd=spent(embedding_job(spec.name)), llm_cost_usd=spent(spec.name),
    )  # fmt: skip
    written = Written()
    return _frames(spec, rows, answers, last, written), written, report


def _frames(
    spec: JobSpec, rows: pl.DataFrame, answers: pl.DataFrame, last: Round, written: Written
) -> Iterator[pl.DataFrame]:
    version = last.classifier.version if last.classifier is not None else None
    field, decision = label_field(spec.response_schema), last.decision
    for start in range(0, max(1, rows.height), SLICE_ROWS):
        end = start + SLICE_ROWS
        part = rows.slice(start, SLICE_ROWS)
        labels = decision.labels[start:end] if decision.labels is not None else None
        confidence = decision.confidence[start:end] if decision.confidence is not None else None
        scored = Decision(labels, confidence, decision.distilled[start:end])
        keys = part[ROW_KEY].implode()
        frame = distilled_output(
            part, answers.filter(pl.col(ROW_KEY).is_in(keys)), field, scored, version
        )
        written.rows += frame.height
        written.failed += int((frame["llm_status"] == "failed").sum())
        yield frame


def distilled_output(
    rows: pl.DataFrame,
    answers: pl.DataFrame,
    field: LabelField,
    decision: Decision,
    version: str | None,
) -> pl.DataFrame:
    """``rows`` (the input's columns and ``ROW_KEY``) with the ``llm_*`` columns of the LLM's
    ``answers`` (the LLM job's output, which has ``ROW_KEY``), the rows the ``decision``
    distilled answered by the classifier ``version``'s labels."""
    labels, confidence, distilled = decision.labels, decision.confidence, decision.distilled
    llm = [c for c in answers.columns if c.startswith("llm_")]
    joined = rows.join(
        answers.select(ROW_KEY, *llm).unique(ROW_KEY, keep="first", maintain_order=True),
        on=ROW_KEY, how="left", maintain_order="left",
    )  # fmt: skip
    mask = pl.Series("distilled", distilled, dtype=pl.Boolean)
    replies = [field.reply(label) if d else None for label, d in _pairs(labels, distilled)]
    parsed = pl.Series("parsed", replies, dtype=answers.schema["llm_parsed"])
    text = pl.Series("text", [None if r is None else orjson.dumps(r).decode() for r in replies])
    joined = joined.with_columns(mask, parsed, text)
    d = pl.col("distilled")
    filled = [
        pl.when(d).then(pl.col("text")).otherwise(pl.col("llm_response")).alias("llm_response"),
        pl.when(d).then(pl.col("parsed")).otherwise(pl.col("llm_parsed")).alias("llm_parsed"),
        pl.when(d).then(pl.lit("succeeded"))
        .when(pl.col("llm_status").is_null()).then(pl.lit("failed"))
        .otherwise(pl.col("llm_status")).alias("llm_status"),
        pl.when(d).then(pl.lit(version)).otherwise(pl.col("llm_model")).alias("llm_model"),
    ]  # fmt: skip
    if "llm_failure_class" in llm:  # a row neither answered nor distilled was not sent
        unsent = d.not_() & pl.col("llm_status").is_null()
        filled.append(
            pl.when(unsent).then(pl.lit(NOT_SENT))
            .otherwise(pl.col("llm_failure_class")).alias("llm_failure_class")
        )  # fmt: skip
    for name in llm:
        if name not in _ANSWERED and name != "llm_failure_class":
            filled.append(_unanswered(name, answers.schema[name], d))
    scores = confidence if confidence is not None else np.full(len(rows), np.nan)
    return (
        joined.with_columns(filled)
        .with_columns(
            pl.when(d).then(pl.lit("distilled")).otherwise(pl.lit("llm")).alias(SOURCE),
            pl.Series(CONFIDENCE, scores, dtype=pl.Float64).fill_nan(None),
        )
        .drop("distilled", "parsed", "text", ROW_KEY)
    )


def _pairs(labels: list[Any] | None, distilled: np.ndarray) -> list[tuple[Any, bool]]:
    if labels is None:
        return [(None, False)] * len(distilled)
    return list(zip(labels, distilled.tolist(), strict=True))


def _unanswered(name: str, dtype: pl.DataType, distilled: pl.Expr) -> pl.Expr:
    """What a distilled row holds in a column the LLM fills: no tokens, attempts or cost."""
    if dtype.is_numeric():
        empty: Any = pl.lit(0, dtype=dtype)
    elif dtype == pl.Boolean:
        empty = pl.lit(False)
    else:
        empty = pl.lit(None, dtype=dtype)
    return pl.when(distilled).then(empty).otherwise(pl.col(name)).alias(name)
