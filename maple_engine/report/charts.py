"""The batch history as PNG charts (matplotlib's object API on the Agg canvas: no display, no
pyplot global state, safe in a Dagster step or a thread).

Three charts, one series per provider and model: the distribution of completion times, tasks
per second of each batch over time, and job size (requests) against completion time.
"""

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn: 1 s of every CLI start
    from matplotlib.axes import Axes

from maple_engine.report.batch_stats import QUEUE, completed

#: chart name -> title; files are ``<name>.png``
CHARTS = {
    "completion_times": "Distribution of completion times",
    "tasks_per_s": "Tasks per second of each batch",
    "size_vs_completion": "Batch size vs completion time",
}
_UNITS = ((3600.0, "hours"), (60.0, "minutes"), (1.0, "seconds"))


def _unit(seconds: pl.Series) -> tuple[float, str]:
    top = float(seconds.max() or 0.0)  # type: ignore[arg-type]
    return next(((s, name) for s, name in _UNITS if top >= 2 * s), _UNITS[-1])


def _series(done: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    parts = done.partition_by(QUEUE, as_dict=True, maintain_order=True)
    return [(f"{provider} {model}", part) for (provider, model), part in sorted(parts.items())]


def _completion_times(ax: "Axes", done: pl.DataFrame) -> None:
    scale, unit = _unit(done["duration_s"])
    series = _series(done)
    ax.hist(
        [part["duration_s"].to_numpy() / scale for _, part in series],
        bins=30,
        label=[name for name, _ in series],
        stacked=True,
    )
    ax.set_xlabel(f"completion time ({unit})")
    ax.set_ylabel("batches")


def _tasks_per_s(ax: "Axes", done: pl.DataFrame) -> None:
    for name, part in _series(done):
        ax.scatter(part["created_at"].to_list(), part["tasks_per_s"].to_numpy(), s=14, label=name)
    ax.set_xlabel("batch created (UTC)")
    ax.set_ylabel("tasks per second")
    ax.figure.autofmt_xdate()


def _size_vs_completion(ax: "Axes", done: pl.DataFrame) -> None:
    scale, unit = _unit(done["duration_s"])
    for name, part in _series(done):
        ax.scatter(
            part["requests"].to_numpy(), part["duration_s"].to_numpy() / scale, s=14, label=name
        )
    ax.set_xlabel("requests in the batch")
    ax.set_ylabel(f"completion time ({unit})")


_DRAW: dict[str, Callable[["Axes", pl.DataFrame], None]] = {
    "completion_times": _completion_times,
    "tasks_per_s": _tasks_per_s,
    "size_vs_completion": _size_vs_completion,
}


def chart_pngs(history: pl.DataFrame) -> dict[str, bytes]:
    """Every chart of `CHARTS` as PNG bytes, drawn from the completed batches."""
    from matplotlib.figure import Figure

    done = completed(history)
    pngs = {}
    for name, title in CHARTS.items():
        fig = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        if done.height:
            _DRAW[name](ax, done)
            ax.legend(fontsize="small")
            ax.grid(alpha=0.3)
        else:
            ax.text(0.5, 0.5, "no completed batches yet", ha="center", va="center")
            ax.set_axis_off()
        ax.set_title(f"{title} ({done.height} batches)")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        pngs[name] = buffer.getvalue()
    return pngs


def write_pngs(pngs: dict[str, bytes], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in pngs.items():
        path = folder / f"{name}.png"
        path.write_bytes(data)
        paths.append(path)
    return paths
