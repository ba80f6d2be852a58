"""``maple_reconcile``: one UTC day of the cost ledger against the provider's own bill.

Each partition runs what ``maple reconcile --since DAY --until DAY`` runs (the
``maple_billing`` resource holds the provider, its admin key and the tolerance): the table of
ledger vs provider per model in Markdown metadata, the totals, and the ``within_tolerance``
asset check, which fails (severity ERROR) naming every model that drifted.
"""

from datetime import date

import dagster as dg
import polars as pl

from maple_assets.graph.batch_stats import daily_refresh
from maple_engine.ledger.reconcile import drift_lines

RECONCILE = dg.AssetKey("maple_reconcile")
CHECK = "within_tolerance"
_SHOWN = [
    "model", "ledger_input_tokens", "provider_input_tokens", "ledger_output_tokens",
    "provider_output_tokens", "ledger_cost_usd", "provider_cost_usd", "drift_usd", "drift_pct",
    "drifted",
]  # fmt: skip


def reconcile_asset(start_date: str = "2026-01-01", cron: str = "0 2 * * *") -> dg.AssetsDefinition:
    """The asset, partitioned by UTC day from ``start_date`` up to today; at ``cron`` (UTC) the
    automation sensor reconciles yesterday and today again (providers' reports fill in late)."""

    @dg.asset(
        key=RECONCILE,
        partitions_def=dg.DailyPartitionsDefinition(start_date=start_date, end_offset=1),
        group_name="maple_operations",
        required_resource_keys={"maple_costs", "maple_billing"},
        automation_condition=daily_refresh(cron),
        check_specs=[dg.AssetCheckSpec(CHECK, asset=RECONCILE)],
        description="The cost ledger against the provider's own usage and cost reports for that "
        "UTC day, per model: tokens and dollars on both sides and the drift.",
    )
    def maple_reconcile(context: dg.AssetExecutionContext) -> dg.MaterializeResult:  # type: ignore[type-arg]
        day = date.fromisoformat(context.partition_key)
        table = context.resources.maple_billing.reconcile(context.resources.maple_costs, day)
        drifted = drift_lines(table)
        totals = {
            f"{side}_usd": float(table[f"{side}_cost_usd"].sum()) for side in ("ledger", "provider")
        }
        check = dg.AssetCheckResult(
            check_name=CHECK,
            passed=not drifted,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"drifted": len(drifted), "lines": dg.MetadataValue.md("\n\n".join(drifted))},
        )
        return dg.MaterializeResult(
            metadata={
                "models": table.height,
                "drifted": len(drifted),
                **totals,
                "table": dg.MetadataValue.md(_markdown(table)),
            },
            check_results=[check],
        )

    return maple_reconcile


def _markdown(table: pl.DataFrame) -> str:
    if table.is_empty():
        return "No spend in the ledger or the provider's reports that day."
    shown = table.select(_SHOWN)
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * shown.width]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in shown.iter_rows()]
    return "\n".join(lines)
