"""`maple reconcile`: the ledger against the provider's own bill, per UTC day and model.

Reads the provider's admin usage and cost reports (``<FAMILY>_ADMIN_KEY``, at the API's base
URL), prints ledger vs provider tokens and dollars with the drift, and exits 0 when every day
and model is within tolerance, 3 with one line per drifted day and model otherwise. ``--by
team``: per day, team (its project or workspace in ``MAPLE_TEAM_ATTRIBUTION``'s map) and model,
and exit 3 also for spend on a project or workspace the map does not know.
"""

from datetime import UTC, date, datetime, timedelta

import click
import polars as pl

from maple_assets.cli.costs import ledger_options, ledger_settings
from maple_assets.cli.errors import ROWS_FAILED
from maple_assets.cli.tables import render
from maple_engine.errors import ConfigError
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.reconcile import (
    Tolerance,
    account_word,
    drift_lines,
    estimated_line,
    reconcile,
)
from maple_engine.providers.attribution import ENV as ATTRIBUTION_ENV
from maple_engine.providers.attribution import EXAMPLE as ATTRIBUTION_EXAMPLE
from maple_engine.providers.attribution import load_attribution
from maple_engine.providers.registry import capabilities, names
from maple_engine.settings import admin_key_env

DRIFT = ROWS_FAILED  # exit 3: the provider billed something else than the ledger recorded
DEFAULT_DAYS = 7
RECONCILED = names(lambda c: c.billing_report is not None)
_DAY = click.DateTime(formats=["%Y-%m-%d"])


@click.command("reconcile")
@click.option("--provider", required=True, type=click.Choice(RECONCILED), help="Whose bill.")
@click.option("--since", type=_DAY, default=None, help="First UTC day [default: 6 days ago].")
@click.option("--until", type=_DAY, default=None, help="Last UTC day [default: today].")
@click.option(
    "--tolerance-pct",
    type=click.FloatRange(min=0),
    default=Tolerance.pct,
    show_default=True,
    help="A day and model drifts when it is off by more than this percentage...",
)
@click.option(
    "--tolerance-usd",
    type=click.FloatRange(min=0),
    default=Tolerance.usd,
    show_default=True,
    help="...and by more than this many dollars.",
)
@click.option(
    "--by",
    type=click.Choice(["team"]),
    default=None,
    help="team: per team, the provider's reports grouped by project or workspace and mapped "
    f"to teams through {ATTRIBUTION_ENV}; spend on a project the map lacks is flagged.",
)
@ledger_options
def reconcile_command(
    *,
    provider: str,
    since: datetime | None,
    until: datetime | None,
    tolerance_pct: float,
    tolerance_usd: float,
    by: str | None,
    storage: str | None,
    db: str | None,
) -> None:
    """The ledger against the provider's usage and cost reports, per day and model."""
    last = until.date() if until else datetime.now(UTC).date()
    first = since.date() if since else last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise ConfigError(f"--since {first} is after --until {last}; swap them.")
    settings = ledger_settings(storage, db)
    teams = None
    if by == "team":
        if not settings.team_attribution:
            raise ConfigError(
                f"--by team needs the team attribution map: set {ATTRIBUTION_ENV} to a JSON "
                f"file like {ATTRIBUTION_EXAMPLE}."
            )
        teams = load_attribution(settings.team_attribution)
    family = capabilities(provider).credentials or provider
    admin_key = settings.admin_key(family)
    if admin_key is None:
        raise ConfigError(
            f"{admin_key_env(family)} is not set: export an admin key of the organisation "
            f"({provider}'s usage and cost reports need one; an API key is refused)."
        )
    with CostLedger(database_url=settings.cost_db, storage_root=settings.storage_root) as ledger:
        table = reconcile(
            ledger,
            provider,
            admin_key=admin_key,
            base_url=settings.api(family).get("base_url"),
            days=(first, last),
            tolerance=Tolerance(tolerance_pct, tolerance_usd),
            teams=teams,
        )
    account = account_word(provider)
    click.echo(_render(table, first, last, account))
    estimated = estimated_line(table)
    if estimated is not None:
        click.echo(estimated)
    drifted = drift_lines(table, account)
    for line in drifted:
        click.echo(line, err=True)
    if drifted:
        raise SystemExit(DRIFT)


def _render(table: pl.DataFrame, first: date, last: date, account: str) -> str:
    if table.is_empty():
        return f"No spend in the ledger or the provider's reports from {first} to {last}."
    teams = "team" in table.columns
    header = ["day", *(["team", account] if teams else []), "model"]
    header += ["ledger tokens in/out", "provider tokens in/out"]
    header += ["ledger USD", "provider USD", "drift USD", "drift %", ""]
    rows = [
        [
            str(r["day"]),
            *([r["team"], r["account"] or "-"] if teams else []),
            r["model"],
            f"{r['ledger_input_tokens']:,}/{r['ledger_output_tokens']:,}",
            f"{r['provider_input_tokens']:,}/{r['provider_output_tokens']:,}",
            f"{r['ledger_cost_usd']:.6f}",
            f"{r['provider_cost_usd']:.6f}",
            f"{r['drift_usd']:+.6f}",
            "" if r["drift_pct"] is None else f"{r['drift_pct']:+.2f}",
            _flag(r),
        ]
        for r in table.iter_rows(named=True)
    ]
    return render(header, rows, align=("ll" if teams else "") + "llrrrrrrl")


def _flag(row: dict[str, object]) -> str:
    if row.get("unknown"):
        return "UNKNOWN"
    return "DRIFT" if row["drifted"] else "ok"
