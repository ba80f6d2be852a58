"""``maple_batch_stats``: the batch statistics of one UTC day as a daily-partitioned asset.

Each partition reads the batches created that day from the batch history in the cost ledger
and materializes what ``maple stats --since DAY`` shows for them: the percentile table and the
charts in the asset's Markdown metadata (the UI draws them), the self-contained HTML report and
the per-batch CSV under the storage root (``_reports/batch_stats/<day>.html``, ``.csv``).
"""

from datetime import date, timedelta
from typing import Any

import dagster as dg

from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.report.batch_stats import batch_table, completed, percentile_table, readable
from maple_engine.report.charts import chart_pngs
from maple_engine.report.html_report import html_report, markdown_report
from maple_engine.storage.layout import batch_stats_report

BATCH_STATS = dg.AssetKey("maple_batch_stats")


def daily_refresh(cron: str) -> dg.AutomationCondition[Any]:
    """Yesterday's and today's partitions, each time ``cron`` (UTC) passes."""
    window: dg.AutomationCondition[Any] = dg.AutomationCondition.in_latest_time_window(
        timedelta(days=2)
    )
    tick: dg.AutomationCondition[Any] = dg.AutomationCondition.cron_tick_passed(cron)
    return (window & tick.since_last_handled()).with_label(f"yesterday and today at {cron} UTC")


def batch_stats_asset(
    start_date: str = "2026-01-01", cron: str = "0 1 * * *"
) -> dg.AssetsDefinition:
    """The asset, partitioned by UTC day from ``start_date`` up to today (partial until the
    day ends); at ``cron`` (UTC) the automation sensor materializes yesterday and today."""
    refresh = daily_refresh(cron)

    @dg.asset(
        key=BATCH_STATS,
        partitions_def=dg.DailyPartitionsDefinition(start_date=start_date, end_offset=1),
        group_name="maple_operations",
        required_resource_keys={"maple_costs", "maple_storage"},
        automation_condition=refresh,
        description="Turnaround and tasks/s of the provider batches created that UTC day, per "
        "provider and model: percentiles, charts, HTML report and per-batch CSV.",
    )
    def maple_batch_stats(context: dg.AssetExecutionContext) -> dg.MaterializeResult:  # type: ignore[type-arg]
        day = date.fromisoformat(context.partition_key)
        history = context.resources.maple_costs.batch_history(
            HistoryFilter(since=day, until=day + timedelta(days=1))
        )
        rows = readable(percentile_table(history))
        pngs = chart_pngs(history)
        storage = context.resources.maple_storage.storage()
        page = html_report(
            f"Maple batch statistics {day}", f"batches created {day} (UTC)", rows, pngs
        )
        report, batches = batch_stats_report(str(day), "html"), batch_stats_report(str(day), "csv")
        storage.write_bytes(report, page.encode())
        storage.write_bytes(batches, batch_table(history).write_csv().encode())
        return dg.MaterializeResult(
            metadata={
                "batches": history.height,
                "completed": completed(history).height,
                "stats": dg.MetadataValue.md(markdown_report(rows, pngs)),
                "report": dg.MetadataValue.path(storage.uri(report)),
                "batches_csv": dg.MetadataValue.path(storage.uri(batches)),
            }
        )

    return maple_batch_stats
