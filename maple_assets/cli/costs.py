"""`maple costs`: what jobs spent, what batch pricing saved (`savings_usd`, vs real-time prices)
and what prompt caching saved (`cache_savings_usd`, vs the same tokens uncached), from the ledger.

Registered in the `maple` group elsewhere; also runs alone as `python -m maple_assets.cli.costs`.
"""

import csv
import io
import json
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any, get_args

import click
from sqlalchemy.engine import make_url

from maple_assets.cli.tables import render
from maple_engine.distill.plan import embedding_jobs
from maple_engine.distill.reports import DistillReport, distilled_jobs, read_reports
from maple_engine.errors import ConfigError
from maple_engine.ledger.costs import CostLedger, GroupBy
from maple_engine.settings import COST_DB_ENV, Settings
from maple_engine.storage.storage import Storage

FORMATS = ("table", "csv", "json")
_NUMBERS = ("requests", "input_tokens", "cached_input_tokens", "output_tokens")
_MONEY = ("cost_usd", "savings_usd", "cache_savings_usd")
#: Of the output tokens, those spent reasoning: beside them in the table, last in the CSV (a
#: column added after the others, so tools reading by position read what they did), before
#: ``estimated_tokens`` (of all tokens, those of replies that reported no usage; CSV and JSON)
#: and ``downgraded_requests`` (served at the standard tier though another was asked).
_REASONING = "reasoning_tokens"


def ledger_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--storage`` and ``--db``: where the ledger is (every command reading it takes them)."""
    storage = click.option(
        "--storage",
        default=None,
        help="Storage root whose costs.sqlite is the default ledger [env: MAPLE_STORAGE; "
        "default: ./.maple].",
    )
    db = click.option(
        "--db",
        "db",
        default=None,
        help=f"Ledger database URL, e.g. postgresql+psycopg2://... [env: {COST_DB_ENV}].",
    )
    return storage(db(command))


def ledger_settings(storage: str | None, db: str | None) -> Settings:
    """The settings of a command that reads the ledger: a SQLite ledger named outright (``--db``
    or ``$MAPLE_COST_DB``) whose file does not exist is a mistyped path, not an empty ledger."""
    settings = Settings.load(storage=storage, cost_db=db)
    url = settings.cost_db
    if url is not None and url.startswith("sqlite:"):
        path = make_url(url).database
        if path and path != ":memory:" and not Path(path).exists():
            raise ConfigError(
                f"No cost ledger at {path}: nothing has recorded costs there. Check --db (or "
                f"${COST_DB_ENV}); a storage root's own ledger is found with --storage."
            )
    return settings


@click.command("costs")
@click.option(
    "--by",
    "by",
    type=click.Choice(get_args(GroupBy)),
    default="team",
    show_default=True,
    help="Group spend by team, job, model or UTC day.",
)
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="Only costs recorded on or after this UTC day (YYYY-MM-DD).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="table for people, csv or json (a list of objects) for tools.",
)
@ledger_options
def costs_command(
    by: GroupBy, since: datetime | None, fmt: str, storage: str | None, db: str | None
) -> None:
    """Show recorded LLM spend, batch and cache savings, grouped by team, job, model or day."""
    since_day: date | None = since.date() if since is not None else None
    settings = ledger_settings(storage, db)
    with CostLedger(database_url=settings.cost_db, storage_root=settings.storage_root) as tracker:
        rows = tracker.report(by=by, since=since_day)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    elif fmt == "csv":
        click.echo(render_csv(by, rows), nl=False)
    else:
        store = Storage(settings.storage_root)
        grouped = embedding_jobs(distilled_jobs(store)) if by == "job" else {}
        click.echo(render_table(by, rows, grouped))
        distilled = read_reports(store)
        if distilled:
            click.echo("")
            click.echo(render_distilled(distilled))


def render_csv(by: str, rows: list[dict[str, Any]]) -> str:
    """The report as CSV with a header line."""
    out = io.StringIO()
    fields = [by, *_NUMBERS, *_MONEY, _REASONING, "estimated_tokens", "downgraded_requests"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def render_table(by: str, rows: list[dict[str, Any]], grouped: dict[str, str] | None = None) -> str:
    """The report as aligned columns (numbers right-aligned) with a total line; ``grouped``
    (by job): distilled jobs' embedding jobs, each shown under its distilled job, whose row is
    both jobs' sum above one row each (``llm``, ``embeddings``)."""
    if not rows:
        return "No costs recorded."
    header = [by, *_NUMBERS, _REASONING, *_MONEY]
    total = _sum(rows, header, "TOTAL")
    shown = _grouped(by, rows, grouped or {}, header)
    body = [[_cell(name, row[name]) for name in header] for row in shown]
    return render(header, body, footer=[_cell(name, total[name]) for name in header])


def _sum(rows: list[dict[str, Any]], header: list[str], key: str) -> dict[str, Any]:
    return {header[0]: key} | {name: sum(row[name] for row in rows) for name in header[1:]}


def _grouped(
    by: str, rows: list[dict[str, Any]], grouped: dict[str, str], header: list[str]
) -> list[dict[str, Any]]:
    """``rows``, each distilled job's as its jobs' sum followed by each job's own row."""
    by_job = {row[by]: row for row in rows}
    embedding_of = {owner: job for job, owner in grouped.items()}
    shown: list[dict[str, Any]] = []
    for row in rows:
        owner = grouped.get(row[by], row[by])
        if owner not in embedding_of:
            shown.append(row)
            continue
        if any(r[by] == f"{owner} (distilled)" for r in shown):
            continue  # its jobs' rows are shown
        jobs = (("llm", owner), ("embeddings", embedding_of[owner]))
        parts = [(kind, by_job[job]) for kind, job in jobs if job in by_job]
        shown.append(_sum([part for _, part in parts], header, f"{owner} (distilled)"))
        shown.extend(part | {by: f"  {kind}"} for kind, part in parts)
    return shown


def render_distilled(reports: dict[str, DistillReport]) -> str:
    """The distilled jobs of the storage root (``--distill``): rows the classifier answered,
    its agreement with the LLM on held-out sample rows, and what the job spent (embeddings and
    LLM, every run) against sending every row to the LLM."""
    header = ["distilled job", "rows", "distilled", "agreement", "held_out", "spent_usd",
              "every_row_usd"]  # fmt: skip
    body = [
        [
            job, f"{r.rows:,d}", f"{r.distilled:,d}", f"{r.agreement:.1%}", f"{r.held_out:,d}",
            f"{r.embedding_cost_usd + r.llm_cost_usd:,.6f}", f"{r.all_llm_cost_usd:,.6f}",
        ]
        for job, r in reports.items()
    ]  # fmt: skip
    return render(header, body)


def _cell(name: str, value: Any) -> str:
    if name in _MONEY:
        return f"{value:,.6f}"
    if name in _NUMBERS or name == _REASONING:
        return f"{value:,d}"
    return str(value)


if __name__ == "__main__":
    costs_command()
