"""``maple_reconcile``: the recent UTC days of the cost ledger against the provider's own bill.

Not partitioned (``maple_assets.graph.recent_days``): each materialization covers a window of
UTC days (default yesterday and today, as providers' reports fill in late) and runs what
``maple reconcile --since FIRST --until LAST`` runs (the ``maple_billing`` resource holds the
provider, its admin key and the tolerance): the table of ledger vs provider per day and model
(per day, team, project or workspace and model when the resource has a ``team_attribution``
map) in Markdown metadata, the totals, and the ``within_tolerance`` asset check, which fails
(severity ERROR) naming every day and model that drifted and every project the map does not
know.

Without an admin key (the emulator's sample, a deployment that has none) there is nothing to
compare: a run skips the asset with one line naming the variable to set (the step succeeds,
nothing is materialized, the check stays not evaluated), and the code location leaves it out of
its automation, so nothing turns red every night for a setting no one gave.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import polars as pl

from maple_assets.graph.checks import not_yet_evaluated
from maple_assets.graph.recent_days import RecentDays, daily_refresh

RECONCILE = dg.AssetKey("maple_reconcile")
CHECK = "within_tolerance"
_SHOWN = [
    "model", "ledger_input_tokens", "provider_input_tokens", "ledger_output_tokens",
    "provider_output_tokens", "ledger_cost_usd", "provider_cost_usd", "drift_usd", "drift_pct",
    "drifted",
]  # fmt: skip


def reconcile_asset(cron: str = "0 2 * * *", automate: bool = True) -> dg.AssetsDefinition:
    """The asset; with ``automate``, at ``cron`` (UTC) the automation sensor reconciles
    yesterday and today (again: providers' reports fill in late); a run's config (``days``,
    ``until``) covers other days."""
    spec = dg.AssetSpec(
        RECONCILE,
        group_name="maple_operations",
        automation_condition=daily_refresh(cron) if automate else None,
        skippable=True,  # no admin key: skipped, not failed
        description="The cost ledger against the provider's own usage and cost reports for each "
        "of the recent UTC days (default yesterday and today), per day and model: tokens and "
        "dollars on both sides and the drift. Needs the provider's admin key "
        "(OPENAI_ADMIN_KEY); without one a run skips it.",
    )
    check = dg.AssetCheckSpec(
        CHECK,
        asset=RECONCILE,
        description="Every model's ledger cost within the tolerance of the provider's own bill "
        "for each day; a failure names each day and model that drifted and by how much. "
        + not_yet_evaluated("as a day is reconciled with the admin key (OPENAI_ADMIN_KEY)"),
    )

    @dg.multi_asset(
        specs=[spec],
        check_specs=[check],
        can_subset=True,
        required_resource_keys={"maple_costs", "maple_billing"},
    )
    def maple_reconcile(context: dg.AssetExecutionContext, config: RecentDays) -> Iterator[Any]:
        billing = context.resources.maple_billing
        if not billing.admin_key:
            context.log.warning(billing.not_configured())
            return
        window = config.window()
        table = billing.reconcile(context.resources.maple_costs, (window[0], window[-1]))
        drifted = billing.drift_lines(table)
        totals = {
            f"{side}_usd": float(table[f"{side}_cost_usd"].sum()) for side in ("ledger", "provider")
        }
        result = dg.AssetCheckResult(
            asset_key=RECONCILE,
            check_name=CHECK,
            passed=not drifted,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"drifted": len(drifted), "lines": dg.MetadataValue.md("\n\n".join(drifted))},
        )
        yield dg.MaterializeResult(
            asset_key=RECONCILE,
            metadata={
                "days": f"{window[0]} to {window[-1]}",
                "models": table["model"].n_unique(),
                "drifted": len(drifted),
                **totals,
                "table": dg.MetadataValue.md(_markdown(table)),
            },
            check_results=[result],
        )

    return maple_reconcile


def _markdown(table: pl.DataFrame) -> str:
    if table.is_empty():
        return "No spend in the ledger or the provider's reports those days."
    teams = [c for c in ("team", "account") if c in table.columns]
    shown = table.select("day", *teams, *_SHOWN)
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * shown.width]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in shown.iter_rows()]
    return "\n".join(lines)
