"""One record of the cost ledger: exact sums over the billed requests of one shard attempt."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, get_args

import polars as pl

from maple_engine.ledger.pricing import ModelPrice, cost_expr, served_standard
from maple_engine.ledger.schema import TOKENS

Mode = Literal["batch", "realtime"]


@dataclass(frozen=True)
class AttemptCost:
    """Exact sums over the billed requests of one attempt of one shard of one job."""

    job: str
    team: str
    model: str
    provider: str
    mode: Mode
    shard: str
    attempt: int
    batch_id: str | None
    requests: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float
    realtime_cost_usd: float
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # The same usage with no prompt cache (every input token fresh), in the same mode; None in
    # records made before it was kept (reports then count no cache saving for them).
    uncached_cost_usd: float | None = None
    # Of ``output_tokens``, those the model spent reasoning (0 where the provider reports none).
    reasoning_tokens: int = 0
    # Of the input and output tokens, those of replies that reported no usage (estimated).
    estimated_tokens: int = 0
    # Of the requests, those the provider served at the standard tier though the attempt asked
    # for another (a priority request over its limit): billed at the standard price.
    downgraded_requests: int = 0

    def __post_init__(self) -> None:
        if self.mode not in get_args(Mode):
            raise ValueError(f"mode must be 'batch' or 'realtime', not {self.mode!r}")
        counts = (
            self.attempt,
            self.requests,
            self.reasoning_tokens,
            self.estimated_tokens,
            self.downgraded_requests,
            *(getattr(self, t) for t in TOKENS),
        )
        if min(counts) < 0:
            raise ValueError(f"attempt, requests and tokens must not be negative: {self}")
        if self.recorded_at.tzinfo is None:
            object.__setattr__(self, "recorded_at", self.recorded_at.replace(tzinfo=UTC))

    @classmethod
    def from_rows(
        cls,
        rows: pl.DataFrame,
        price: ModelPrice,
        *,
        job: str,
        team: str,
        model: str,
        provider: str,
        mode: Mode,
        shard: str,
        attempt: int,
        batch_id: str | None,
        batch_prices: bool | None = None,
        priority: bool = False,
    ) -> "AttemptCost":
        """Sum one attempt's billed rows (columns `input_tokens`, `cached_input_tokens`,
        `cache_write_tokens`, `output_tokens`; one row per billed request), priced at batch
        prices when ``batch_prices`` (default: when ``mode`` is batch; a flex attempt is
        real-time at batch prices), at the priority tier's when ``priority``
        (``realtime_cost_usd`` stays the standard real-time price: the difference is the
        tier's premium). A row the provider says it served at the standard tier (its
        ``served_tier``) is priced at the standard real-time price and counted downgraded."""
        batch = mode == "batch" if batch_prices is None else batch_prices
        paid = price.at_priority() if priority else price
        standard = _standard(rows)

        def priced(cached: bool) -> pl.Expr:
            asked = cost_expr(paid, batch=batch and not priority, cached=cached)
            return (
                pl.when(standard)
                .then(cost_expr(price, batch=False, cached=cached))
                .otherwise(asked)
            )

        sums = rows.select(
            *(pl.col(t).sum().cast(pl.Int64) for t in TOKENS),
            priced(cached=True).sum().alias("cost"),
            cost_expr(price, batch=False).sum().alias("realtime"),
            priced(cached=False).sum().alias("uncached"),
            _reasoning(rows).sum().cast(pl.Int64).alias("reasoning_tokens"),
            _estimated(rows).sum().cast(pl.Int64).alias("estimated_tokens"),
            standard.sum().cast(pl.Int64).alias("downgraded"),
        ).row(0, named=True)
        return cls(
            job=job,
            team=team,
            model=model,
            provider=provider,
            mode=mode,
            shard=shard,
            attempt=attempt,
            batch_id=batch_id,
            requests=rows.height,
            input_tokens=int(sums["input_tokens"] or 0),
            cached_input_tokens=int(sums["cached_input_tokens"] or 0),
            cache_write_tokens=int(sums["cache_write_tokens"] or 0),
            output_tokens=int(sums["output_tokens"] or 0),
            cost_usd=float(sums["cost"] or 0.0),
            realtime_cost_usd=float(sums["realtime"] or 0.0),
            uncached_cost_usd=float(sums["uncached"] or 0.0),
            reasoning_tokens=int(sums["reasoning_tokens"] or 0),
            estimated_tokens=int(sums["estimated_tokens"] or 0),
            downgraded_requests=int(sums["downgraded"] or 0),
        )


def _standard(rows: pl.DataFrame) -> pl.Expr:
    """The rows served at the standard tier though another was asked (none without the
    column)."""
    return served_standard() if "served_tier" in rows.columns else pl.lit(False)


def _estimated(rows: pl.DataFrame) -> pl.Expr:
    """The tokens of the rows whose reply reported no usage (estimated from their text)."""
    if "tokens_estimated" not in rows.columns:
        return pl.lit(0, pl.Int64)
    tokens = pl.col("input_tokens") + pl.col("output_tokens")
    return pl.when(pl.col("tokens_estimated").fill_null(False)).then(tokens).otherwise(0)


def _reasoning(rows: pl.DataFrame) -> pl.Expr:
    """The rows' reasoning tokens (null: not reported, none counted)."""
    if "reasoning_tokens" in rows.columns:
        return pl.col("reasoning_tokens").fill_null(0)
    return pl.lit(0, pl.Int64)
