"""`maple stats`: how the provider batches behaved, from the batch history in the ledger.

Prints p50/p90/p99 turnaround and tasks per second per provider and model; writes the per-batch
table (``--csv``), the charts (``--png DIR``) and one self-contained HTML report (``--html``).
"""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import click

from maple_assets.cli.costs import ledger_options, ledger_settings
from maple_assets.cli.tables import render
from maple_engine.errors import ConfigError
from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.ledger.costs import CostLedger
from maple_engine.report.batch_stats import batch_table, percentile_table, readable
from maple_engine.report.charts import chart_pngs, write_pngs
from maple_engine.report.html_report import html_report


@click.command("stats")
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="Only batches created on or after this UTC day (YYYY-MM-DD).",
)
@click.option("--job", default=None, help="Only this job's batches.")
@click.option("--team", default=None, help="Only this team's batches.")
@click.option("--provider", default=None, help="Only this provider's batches.")
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the per-batch table (CSV).",
)
@click.option(
    "--png",
    "png_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write the charts as PNG files into DIR.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write one self-contained HTML report (table and charts).",
)
@ledger_options
def stats_command(
    *,
    since: datetime | None,
    job: str | None,
    team: str | None,
    provider: str | None,
    csv_path: str | None,
    png_dir: str | None,
    html_path: str | None,
    storage: str | None,
    db: str | None,
) -> None:
    """Batch turnaround and throughput per provider and model: table, CSV, charts, HTML."""
    where = HistoryFilter(since and since.date(), job, team, provider)
    settings = ledger_settings(storage, db)
    with CostLedger(database_url=settings.cost_db, storage_root=settings.storage_root) as ledger:
        history = ledger.batch_history(where)
    rows = readable(percentile_table(history))
    if rows:
        click.echo(render(list(rows[0]), [list(r.values()) for r in rows], align="ll" + "r" * 8))
    else:
        click.echo("No batches recorded" + (f" ({scope(where)})." if scope(where) else "."))
    if csv_path:
        _write("--csv", csv_path, lambda p: batch_table(history).write_csv(p))
    pngs = chart_pngs(history) if png_dir or html_path else {}
    if png_dir:
        _write("--png", png_dir, lambda p: write_pngs(pngs, p))
    if html_path:
        page = html_report("Maple batch statistics", scope(where) or "every batch", rows, pngs)
        _write("--html", html_path, lambda p: p.write_text(page, encoding="utf-8"))


def scope(where: HistoryFilter) -> str:
    """What a report covers, as words (empty: everything)."""
    parts = [f"since {where.since}"] if where.since else []
    parts += [f"{k} {v}" for k, v in (("job", where.job), ("team", where.team)) if v]
    return ", ".join(parts + ([f"provider {where.provider}"] if where.provider else []))


def _write(option: str, target: str, write: Callable[[Path], object]) -> None:
    path = Path(target).expanduser()
    try:
        write(path)
    except OSError as exc:
        raise ConfigError(
            f"{option} {target}: cannot write there ({exc.strerror or exc}); give a writable path."
        ) from None
    click.echo(f"wrote {path}", err=True)
