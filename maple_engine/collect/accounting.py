"""Every line accounted for: an ended batch's result lines matched to the requests it was sent.

A batch's output and error files are read whatever way it ended (completed, expired, cancelled,
failed), so the answers of a batch that did not complete are kept. Each request sent comes out
answered, failed by class, or ``missing``: its batch says it ran every request (`RAN_EVERY_REQUEST`)
and neither file holds a line for it. A missing line is resent, like an ``expired`` one. A second
line for the same request is counted and never merged (an answer wins over a failure, then the
first), and a line for a request the batch was not sent is counted and ignored.
"""

from typing import Any

import polars as pl

from maple_engine.failures import FailureClass
from maple_engine.model import LineTally
from maple_engine.policy import RetryPolicy

#: Ended statuses whose result files hold a line for every request of the batch: a batch that
#: completed, and an Anthropic message batch that ended (its results list each request,
#: canceled and expired ones too). Elsewhere a request without a line never ran (``expired``).
RAN_EVERY_REQUEST = frozenset({"completed", "ended"})


def one_line_each(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` with one line per custom id: an answer before a failure, else the first."""
    if not lines["custom_id"].is_duplicated().any():
        return lines
    answered_first = lines.with_row_index("_at").sort(
        pl.col("status") != "succeeded", "_at", maintain_order=True
    )
    return answered_first.unique(subset="custom_id", keep="first", maintain_order=True).drop("_at")


def tally_lines(sent: pl.Series, lines: pl.DataFrame, missing: int) -> LineTally:
    """The tally of an attempt that sent the custom ids ``sent`` and got ``lines`` back, of
    which ``missing`` requests had no line in a batch that ran every request."""
    ids = lines["custom_id"]
    known = ids.is_in(sent.implode()).fill_null(False)
    return LineTally(
        missing=missing,
        duplicated=int(known.sum()) - ids.filter(known).n_unique(),
        unknown=int((~known).sum()),
    )


MISSING = (pl.col("status") == "failed") & (pl.col("failure_class") == FailureClass.MISSING.value)


def accounting(responses: pl.DataFrame) -> dict[str, int]:
    """Of the rows sent at least once: how many (``sent``), those ``answered``, and those
    ``missing`` (still without a line after their last send)."""
    went = pl.col("attempts") > 0 if "attempts" in responses.columns else pl.lit(True)
    ok = pl.col("status") == "succeeded"
    counts = responses.select(
        went.sum().alias("sent"),
        (went & ok).sum().alias("answered"),
        (went & MISSING).sum().alias("missing"),
    ).row(0, named=True)
    return {key: int(value or 0) for key, value in counts.items()}


def missing_for_good(responses: pl.DataFrame, policy: RetryPolicy, stopped: bool) -> int:
    """Rows still ``missing`` that no later send will answer: their class's retries are spent,
    or the job has stopped sending."""
    sends = responses.filter(MISSING)["attempts"]
    return sum(1 for n in sends if stopped or not policy.allows(FailureClass.MISSING, n))


def line_figures(info: dict[str, Any]) -> dict[str, int]:
    """``sent``, ``answered``, ``failed`` (by a class other than missing) and ``missing`` from
    a shard's or a job's figures (`accounting`'s, summed)."""
    sent, answered, missing = (int(info.get(k, 0)) for k in ("sent", "answered", "missing"))
    failed = sent - answered - missing
    return {"sent": sent, "answered": answered, "failed": failed, "missing": missing}


def describe(info: dict[str, Any]) -> str:
    """``sent N, answered A, failed F, missing M`` (`line_figures` of ``info``)."""
    return ", ".join(f"{key} {value:,}" for key, value in line_figures(info).items())
