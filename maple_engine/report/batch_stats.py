"""Turnaround statistics of the batch history: the per-batch table and the percentiles of
turnaround (created to ended) and tasks per second per provider and model.

Percentiles count only completed batches (an expired, failed or cancelled batch says nothing
of how long the provider takes to finish one); the per-batch table holds every batch.
"""

import polars as pl

#: the per-batch table's columns, in order (``maple stats --csv``)
BATCH_COLUMNS = (
    "provider",
    "model",
    "job",
    "team",
    "batch_id",
    "requests",
    "created_at",
    "completed_at",
    "status",
    "duration_s",
    "tasks_per_s",
    "version",
    "shard",
    "attempt",
    "prompt_tokens",
    "validating_at",
    "in_progress_at",
    "finalizing_at",
)
PERCENTILES = (50, 90, 99)
QUEUE = ("provider", "model")


def batch_table(history: pl.DataFrame) -> pl.DataFrame:
    """One row per batch, ``completed_at`` being the time it ended (whatever its status)."""
    return history.rename({"ended_at": "completed_at"}).select(BATCH_COLUMNS)


def completed(history: pl.DataFrame) -> pl.DataFrame:
    return history.filter((pl.col("status") == "completed") & pl.col("duration_s").is_not_null())


def percentile_table(history: pl.DataFrame) -> pl.DataFrame:
    """Per provider and model: batches, completed ones, and p50/p90/p99 of turnaround
    (``duration_p50_s``...) and of tasks per second (``tasks_per_s_p50``...)."""
    done = completed(history)
    stats = [
        expr
        for p in PERCENTILES
        for expr in (
            pl.col("duration_s").quantile(p / 100, "linear").alias(f"duration_p{p}_s"),
            pl.col("tasks_per_s").quantile(p / 100, "linear").alias(f"tasks_per_s_p{p}"),
        )
    ]
    counts = history.group_by(QUEUE).agg(pl.len().alias("batches"))
    figures = done.group_by(QUEUE).agg(pl.len().alias("completed"), *stats)
    table = counts.join(figures, on=QUEUE, how="left").with_columns(
        pl.col("completed").fill_null(0)
    )
    order = ["batches", "completed", *(f"duration_p{p}_s" for p in PERCENTILES)]
    order += [f"tasks_per_s_p{p}" for p in PERCENTILES]
    return table.select(*QUEUE, *order).sort(QUEUE)


def turnaround_quantile(history: pl.DataFrame, quantile: float) -> dict[tuple[str, str], float]:
    """The ``quantile`` of completed batches' turnaround (seconds) per (provider, model)."""
    q = completed(history).group_by(QUEUE).agg(pl.col("duration_s").quantile(quantile, "linear"))
    return {(r["provider"], r["model"]): float(r["duration_s"]) for r in q.iter_rows(named=True)}


def duration_text(seconds: float | None) -> str:
    """``42s``, ``12m``, ``3.4h``: a turnaround as a person reads it."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def readable(table: pl.DataFrame) -> list[dict[str, str]]:
    """The percentile table with durations as text and rates to two decimals."""
    rows = []
    for row in table.iter_rows(named=True):
        out = {"provider": row["provider"], "model": row["model"]}
        out["batches"] = str(row["batches"])
        out["completed"] = str(row["completed"])
        for p in PERCENTILES:
            out[f"turnaround_p{p}"] = duration_text(row[f"duration_p{p}_s"])
        for p in PERCENTILES:
            rate = row[f"tasks_per_s_p{p}"]
            out[f"tasks/s_p{p}"] = "-" if rate is None else f"{rate:.2f}"
        rows.append(out)
    return rows
