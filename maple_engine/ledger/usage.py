"""What the ledger recorded, per UTC day and model (and team), in the shape a provider's bill is
compared in (`maple_engine.ledger.reconcile`): tokens and dollars of `attempt_costs`, a batch's
day being the day it ended (its batch history), a real-time attempt's the day it was recorded."""

from collections.abc import Sequence
from datetime import date
from typing import Any

import polars as pl
import sqlalchemy as sa

REPORT_SCHEMA = {
    "day": pl.Date,
    "model": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
}
SIDES = ("input_tokens", "output_tokens", "cost_usd")
KEYS = ("day", "model")
#: The key of a bill grouped by account (``maple reconcile --by team``): the project or workspace.
ACCOUNT = "account"
#: The ledger's own count beside them: of its tokens, those of replies that reported no usage
#: (estimated from the text); a provider's bill has no such figure.
ESTIMATED = "estimated_tokens"


def ledger_usage(
    conn: sa.Connection | None,
    costs: sa.Table,
    history: sa.Table,
    providers: Sequence[str],
    days: tuple[date, date],
    *,
    by_team: bool = False,
) -> pl.DataFrame:
    """Tokens and dollars the ledger recorded for ``providers`` per day and model (and
    ``team``, when ``by_team``), ``days`` inclusive, in `REPORT_SCHEMA`."""
    rows: list[dict[str, Any]] = []
    if conn is not None:
        same = sa.and_(
            history.c.provider == costs.c.provider, history.c.batch_id == costs.c.batch_id
        )
        query = (
            sa.select(
                costs.c.team,
                costs.c.model,
                costs.c.input_tokens,
                costs.c.output_tokens,
                costs.c.cost_usd,
                costs.c.estimated_tokens,
                sa.func.coalesce(history.c.ended_at, costs.c.recorded_at).label("at"),
            )
            .select_from(costs.outerjoin(history, same))
            .where(costs.c.provider.in_(providers))
        )
        rows = [dict(r._mapping) for r in conn.execute(query)]
    frame = pl.DataFrame(
        rows,
        schema={
            "team": pl.String,
            "model": pl.String,
            "input_tokens": pl.Int64,
            "output_tokens": pl.Int64,
            "cost_usd": pl.Float64,
            ESTIMATED: pl.Int64,
            "at": pl.Datetime,
        },
    )
    dated = frame.with_columns(pl.col("at").dt.date().alias("day")).drop("at")
    return summed(dated, days, ("day", "team", "model") if by_team else KEYS)


def summed(
    frame: pl.DataFrame, days: tuple[date, date], keys: Sequence[str] = KEYS
) -> pl.DataFrame:
    """``frame``'s rows in ``days`` (inclusive) summed per ``keys`` (day and model; the
    ledger's ``estimated_tokens`` too, where the frame has them)."""
    extra = {k: pl.String for k in keys if k not in REPORT_SCHEMA}
    schema = REPORT_SCHEMA | extra | ({ESTIMATED: pl.Int64} if ESTIMATED in frame.columns else {})
    figures = [c for c in schema if c not in keys]
    return (
        frame.filter(pl.col("day").is_between(*days))
        .group_by(*keys)
        .agg(pl.col(c).sum() for c in figures)
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
        .sort(*keys, nulls_last=True)
    )
