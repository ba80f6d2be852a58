"""The ledger reconciled with the provider's own bill, per UTC day and model.

The ledger side sums `attempt_costs` of the providers that bill to one account (a batch's day
is the day it ended, as the batch history recorded it, which is when the provider bills it;
a real-time attempt's is the day it was recorded). The provider side is what its admin reports
say (`ProviderCapabilities.billing_report`: usage for tokens, costs for dollars). Each (day,
model) row shows both and the drift in dollars; a row drifts when the drift exceeds both the
percentage and the dollar tolerance. Model names are compared without a trailing date stamp
(``gpt-4o-mini-2024-07-18`` is ``gpt-4o-mini``), since reports name the snapshot that ran.

By team (`by_team`): the provider's reports grouped by project or workspace (its capabilities'
``attribution``), the ledger's teams put on their project or workspace through the team
attribution map, and the two compared per (day, account, model). Spend on an account the map
does not know is flagged (``unknown``), whatever its size: someone spends outside Maple's teams.
"""

import dataclasses
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

import polars as pl

from maple_engine.errors import AuthError, ConfigError
from maple_engine.ledger.usage import ACCOUNT, ESTIMATED, KEYS, REPORT_SCHEMA, SIDES, summed
from maple_engine.providers.attribution import ENV, AttributionMap
from maple_engine.providers.registry import capabilities, names, one_of
from maple_engine.settings import admin_key_env

if TYPE_CHECKING:
    from maple_engine.ledger.costs import CostLedger
    from maple_engine.providers.base import ProviderCapabilities

_DATE_STAMP = r"-(\d{4}-\d{2}-\d{2}|\d{8})$"
BY_ACCOUNT = ("day", ACCOUNT, "model")
#: The ``team`` of spend on no project or workspace (the default one) and on one the map lacks.
UNATTRIBUTED = "(unattributed)"
UNKNOWN = "(unknown)"


@dataclass(frozen=True)
class Tolerance:
    """How far the provider may be from the ledger: a row drifts past both."""

    pct: float = 1.0
    usd: float = 0.01


def compare(
    ledger: pl.DataFrame,
    provider: pl.DataFrame,
    tolerance: Tolerance,
    keys: tuple[str, ...] = KEYS,
) -> pl.DataFrame:
    """Ledger vs provider per ``keys`` (day and model): ``ledger_*``/``provider_*`` tokens and
    dollars, ``drift_usd`` (provider minus ledger), ``drift_pct`` (of the ledger's dollars;
    null when the ledger has none) and ``drifted``."""

    def side(frame: pl.DataFrame, prefix: str) -> pl.DataFrame:
        named = frame.with_columns(pl.col("model").str.replace(_DATE_STAMP, ""))
        sums = summed(named, (date.min, date.max), keys)
        return sums.rename({c: f"{prefix}_{c}" for c in sums.columns if c not in keys})

    joined = side(ledger, "ledger").join(
        side(provider, "provider"), on=list(keys), how="full", coalesce=True, nulls_equal=True
    )
    estimated = f"ledger_{ESTIMATED}"
    if estimated not in joined.columns:
        joined = joined.with_columns(pl.lit(0, pl.Int64).alias(estimated))
    filled = joined.with_columns(
        *(pl.col(f"{s}_{c}").fill_null(0) for s in ("ledger", "provider") for c in SIDES),
        pl.col(estimated).fill_null(0),
    )
    drift = (pl.col("provider_cost_usd") - pl.col("ledger_cost_usd")).round(9) + 0.0  # no -0
    pct = pl.when(pl.col("ledger_cost_usd") > 0).then(drift / pl.col("ledger_cost_usd") * 100)
    return (
        filled.with_columns(drift.alias("drift_usd"), pct.alias("drift_pct"))
        .with_columns(
            (
                (pl.col("drift_usd").abs() > tolerance.usd)
                & (pl.col("drift_pct").abs().fill_null(float("inf")) > tolerance.pct)
            ).alias("drifted")
        )
        .sort(*keys, nulls_last=True)
    )


def by_team(
    ledger: pl.DataFrame,
    provider: pl.DataFrame,
    tolerance: Tolerance,
    teams: AttributionMap,
    caps: "ProviderCapabilities",
) -> pl.DataFrame:
    """`compare` per (day, account, model): ``ledger`` has a ``team`` column, ``provider`` an
    ``account`` one (project or workspace). Adds ``team`` (the map's teams on the account,
    `UNATTRIBUTED` for none, `UNKNOWN` for an account the map lacks) and ``unknown``, which
    also marks the row ``drifted``."""
    kind = caps.attribution
    accounts = {t: teams.of(t).account(kind) for t in ledger["team"].unique().to_list()}
    ours = ledger.with_columns(
        pl.col("team").replace_strict(accounts, return_dtype=pl.String).alias(ACCOUNT)
    ).drop("team")
    table = compare(ours, provider, tolerance, BY_ACCOUNT)
    found = table[ACCOUNT].drop_nulls().unique().to_list()
    names = {a: ", ".join(teams.teams_of(kind, a)) or UNKNOWN for a in found}
    labels = pl.col(ACCOUNT).replace_strict(names, default=UNATTRIBUTED, return_dtype=pl.String)
    unknown = pl.col(ACCOUNT).is_not_null() & (labels == UNKNOWN)
    return table.with_columns(
        labels.alias("team"),
        unknown.alias("unknown"),
        (pl.col("drifted") | unknown).alias("drifted"),
    ).select("day", "team", pl.exclude("day", "team"))


def estimated_line(table: pl.DataFrame) -> str | None:
    """How much of the ledger's side rests on estimates (replies that reported no usage)."""
    estimated = int(table[f"ledger_{ESTIMATED}"].sum()) if not table.is_empty() else 0
    if not estimated:
        return None
    counted = int(
        table.select(pl.col("ledger_input_tokens", "ledger_output_tokens").sum())
        .sum_horizontal()
        .item()
    )
    return (
        f"estimated: {estimated:,} of the ledger's {counted:,} tokens are estimates (replies "
        "that reported no usage, counted from their text): a drift there may be the estimate's"
    )


def drift_lines(table: pl.DataFrame, account: str = "project") -> list[str]:
    """One line per drifted day and model (and team); per ``account`` (project or workspace)
    the map does not know, a line naming it."""
    return [_drift_line(r, account) for r in table.filter("drifted").iter_rows(named=True)]


def _drift_line(r: dict[str, Any], account: str) -> str:
    if r.get("unknown"):
        return (
            f"unknown {account}: {r['day']} {r['model']}: the provider billed "
            f"${r['provider_cost_usd']:.6f} to {account} {r[ACCOUNT]}, which no team of the "
            f"team attribution map ({ENV}) has: add it to the team that spends there, or find "
            "who does."
        )
    where = f"{r['day']} {r['team']} {r['model']}" if "team" in r else f"{r['day']} {r['model']}"
    return (
        f"drift: {where}: ledger ${r['ledger_cost_usd']:.6f}, provider "
        f"${r['provider_cost_usd']:.6f} ({r['drift_usd']:+.6f} USD"
        + (f", {r['drift_pct']:+.2f}%)" if r["drift_pct"] is not None else ")")
    )


def reconcile(
    ledger: "CostLedger",
    provider: str,
    *,
    admin_key: str,
    base_url: str | None,
    days: tuple[date, date],
    tolerance: Tolerance,
    teams: AttributionMap | None = None,
) -> pl.DataFrame:
    """`compare` the ledger's spend with ``provider``'s admin reports over ``days`` (inclusive);
    per team through ``teams`` (`by_team`) when given. The ledger side counts every provider
    that bills to the same account (the same credentials: a batch provider and its real-time
    twin)."""
    caps = capabilities(provider)
    if caps.billing_report is None or caps.credentials is None:
        with_reports = one_of(lambda c: c.billing_report is not None)
        raise ConfigError(f"{provider} has no billing reports to reconcile; use {with_reports}.")
    if teams is not None and caps.attribution not in ("project-header", "workspace-key"):
        raise ConfigError(f"{provider}'s reports group no spend by team: drop --by team.")
    family = caps.credentials
    grouped = teams is not None
    ours = ledger.billed_usage(names(lambda c: c.credentials == family), days, by_team=grouped)
    try:
        billed = caps.billing_report(base_url, admin_key, *days, by_account=grouped)
    except AuthError as exc:
        raise AuthError(
            f"{provider}'s usage and cost reports refused {admin_key_env(family)} "
            f"(HTTP {exc.status}): set it to an admin key of the organisation; API keys are "
            "refused there.",
            exc.status,
        ) from exc
    schema = REPORT_SCHEMA | {ACCOUNT: pl.String}
    theirs = pl.DataFrame([dataclasses.asdict(b) for b in billed], schema=schema)
    if teams is not None:
        return by_team(ours, theirs, tolerance, teams, caps)
    return compare(ours, theirs.drop(ACCOUNT), tolerance)


def account_word(provider: str) -> str:
    """What ``provider``'s reports group spend by: ``project`` or ``workspace``."""
    return "workspace" if capabilities(provider).attribution == "workspace-key" else "project"
