"""Turnaround by batch size, from the batch history, and the shard size a deadline needs.

The model is one line per provider and model: ``turnaround = a + b * requests``, fitted over
the `RECENT` most recent completed batches of the last `HISTORY_DAYS` days with the
Theil-Sen estimator (``b`` the median of the pairwise slopes, never below 0; ``a`` the median
of what is left), which a few stalled batches do not bend. The p90 line is the same slope with
the 90th percentile of the residuals added to ``a``, or the median line times the 90th
percentile of the batches' ratios to it, whichever is longer (a spread that grows with the
batch's size, as a log-normal one does, shows in the ratios). Below `MIN_BATCHES` completed batches
there is no fit: the job keeps the documented default size (the provider's file limits).

`choose_size` takes the largest shard size whose p90 finish meets the target: full batches
when they make it, smaller ones when they finish sooner and the target needs it. A finish is
counted in waves: the batches that fit in the provider queue at once (`in_flight` requests)
run together, the next wave when they end. With no size that meets the target, the fastest.
"""

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.report.batch_stats import completed, duration_text

MIN_BATCHES = 3
RECENT = 200
HISTORY_DAYS = 30
#: the most shards a chosen size may cut a job into (each shard is a few Dagster runs)
MAX_SHARDS = 200


@dataclasses.dataclass(frozen=True)
class TurnaroundFit:
    """``a + b * requests`` seconds at the median, ``a90 + b * requests`` at p90."""

    provider: str
    model: str
    a: float
    b: float
    a90: float
    batches: int
    #: the median prompt tokens per request of these batches (None where none were billed yet):
    #: how many requests fit in a queue limited by enqueued tokens
    tokens_per_request: float | None = None
    #: the median requests per batch of these batches
    typical_requests: float = 0.0
    #: the 90th percentile of each batch's turnaround over the median line's
    ratio90: float = 1.0

    def seconds(self, requests: int, quantile: float = 0.5) -> float:
        """The expected turnaround of a batch of ``requests`` (``quantile`` 0.5 or 0.9)."""
        median = max(0.0, self.a + self.b * requests)
        if quantile < 0.9:
            return median
        return max(median, self.a90 + self.b * requests, median * self.ratio90)

    def longer_than_typical(self, requests: int) -> float:
        """How much longer than a batch of the typical size one of ``requests`` takes (0 for
        one no larger): what a size-blind percentile of the turnaround must be stretched by."""
        return self.b * max(0.0, requests - self.typical_requests)

    def describe(self) -> str:
        return (
            f"turnaround {self.a:.1f}s + {self.b * 1000:.2f}s per 1,000 requests (p90 "
            f"+{self.a90 - self.a:.1f}s or x{self.ratio90:.2f}), from {self.batches} "
            f"{self.provider} {self.model} batches"
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def fit_turnaround(history: pl.DataFrame, provider: str, model: str) -> TurnaroundFit | None:
    """The fit over ``history``'s recent completed batches of ``provider`` and ``model``."""
    done = completed(history).filter(
        (pl.col("provider") == provider) & (pl.col("model") == model) & (pl.col("requests") > 0)
    )
    done = done.sort("created_at").tail(RECENT)
    if done.height < MIN_BATCHES:
        return None
    x = done.get_column("requests").to_numpy().astype(np.float64)
    y = done.get_column("duration_s").to_numpy().astype(np.float64)
    b = _slope(x, y)
    a = float(np.median(y - b * x))
    a90 = a + float(np.quantile(y - (a + b * x), 0.9))
    per = done.select((pl.col("prompt_tokens") / pl.col("requests")).median()).item()
    typical = float(np.median(x))
    line = np.maximum(a + b * x, 1e-9)
    ratio90 = max(1.0, float(np.quantile(y / line, 0.9)))
    return TurnaroundFit(provider, model, a, b, max(a, a90), done.height, per, typical, ratio90)


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen: the median slope over every pair of batches of different sizes (0 if all
    batches had the same size: then the history says nothing of size)."""
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    if not keep.any():
        return 0.0
    return max(0.0, float(np.median((y[j] - y[i])[keep] / dx[keep])))


def history_fit(costs: Any, provider: str, model: str) -> TurnaroundFit | None:
    """The fit from the ledger's batch history (``costs``: a `CostLedger`), or None."""
    since = (datetime.now(UTC) - timedelta(days=HISTORY_DAYS)).date()
    history = costs.batch_history(HistoryFilter(since=since, provider=provider))
    return fit_turnaround(history, provider, model)


@dataclasses.dataclass(frozen=True)
class Sizing:
    """The shard size chosen for ``rows`` requests, its expected finish (seconds from the
    first submission; None without history) and why."""

    size: int
    shards: int
    p50_s: float | None
    p90_s: float | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def finish_s(
    fit: TurnaroundFit, rows: int, size: int, in_flight: int | None, quantile: float
) -> float:
    """How long ``rows`` requests in batches of ``size`` take: waves of the batches that fit in
    ``in_flight`` requests at once (None: all at once), each as long as its largest batch."""
    shards = math.ceil(rows / size)
    at_once = shards if in_flight is None else max(1, min(shards, in_flight // size))
    waves = math.ceil(shards / at_once)
    return waves * fit.seconds(min(size, rows), quantile)


def choose_size(
    rows: int,
    fit: TurnaroundFit | None,
    target_s: float | None,
    max_requests: int,
    *,
    min_requests: int = 1,
    in_flight: int | None = None,
) -> Sizing:
    """The largest shard size (at most ``max_requests``) whose p90 finish meets ``target_s``."""
    full = max(1, min(max_requests, rows))
    shards = math.ceil(rows / full)
    if fit is None:
        reason = (
            f"no batch history for this provider and model yet ({MIN_BATCHES} completed "
            f"batches needed): full batches of up to {max_requests:,} requests (the default)"
        )
        return Sizing(full, shards, None, None, reason)
    p50, p90 = (finish_s(fit, rows, full, in_flight, q) for q in (0.5, 0.9))
    if target_s is None or p90 <= target_s:
        why = "no deadline or target" if target_s is None else f"within {duration_text(target_s)}"
        reason = f"full batches finish by p90 {duration_text(p90)}, {why}; {fit.describe()}"
        return Sizing(full, shards, p50, p90, reason)
    options = _sizes(rows, max_requests, max(1, min_requests))
    timed = [(finish_s(fit, rows, s, in_flight, 0.9), s) for s in options]
    meets = [s for t, s in timed if t <= target_s]
    size = meets[0] if meets else min(timed, key=lambda ts: (ts[0], -ts[1]))[1]
    p50_s, p90_s = (finish_s(fit, rows, size, in_flight, q) for q in (0.5, 0.9))
    verdict = "meet it" if meets else "is the fastest, and still misses it"
    reason = (
        f"full batches would finish by p90 {duration_text(p90)}, past the target "
        f"{duration_text(target_s)}; batches of {size:,} requests {verdict} (p90 "
        f"{duration_text(p90_s)}); {fit.describe()}"
    )
    return Sizing(size, math.ceil(rows / size), p50_s, p90_s, reason)


def _sizes(rows: int, max_requests: int, min_requests: int) -> list[int]:
    """Even shard sizes from the largest down: ``ceil(rows / k)`` for k shards, at most
    `MAX_SHARDS` (or what the file limit needs) and no smaller than ``min_requests``."""
    fewest = math.ceil(rows / max_requests)
    most = max(fewest, min(MAX_SHARDS, rows // min_requests))
    sizes = sorted({math.ceil(rows / k) for k in range(fewest, most + 1)}, reverse=True)
    return [s for s in sizes if s <= max_requests] or [max_requests]
