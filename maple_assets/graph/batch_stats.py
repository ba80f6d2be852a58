"""``maple_batch_stats``: the batch statistics of the recent UTC days, one report per day.

Not partitioned (``maple_assets.graph.recent_days``): each materialization covers a window of
UTC days (default yesterday and today). For each day it reads the batches created that day from
the batch history in the cost ledger and writes what ``maple stats --since DAY`` shows for them:
the self-contained HTML report and the per-batch CSV under the storage root
(``_reports/batch_stats/<day>.html``, ``.csv``); the asset's Markdown metadata has each day's
percentile table and charts (the UI draws them), newest day first.
"""

from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg

from maple_assets.graph.recent_days import RecentDays, daily_refresh
from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.ledger.costs import CostLedger
from maple_engine.report.batch_stats import batch_table, completed, percentile_table, readable
from maple_engine.report.charts import chart_pngs
from maple_engine.report.html_report import html_report, markdown_report
from maple_engine.storage.layout import batch_stats_report
from maple_engine.storage.storage import Storage

BATCH_STATS = dg.AssetKey("maple_batch_stats")


def batch_stats_asset(cron: str = "0 1 * * *") -> dg.AssetsDefinition:
    """The asset; at ``cron`` (UTC) the automation sensor materializes it (yesterday and
    today); a run's config (``days``, ``until``) covers other days."""

    @dg.asset(
        key=BATCH_STATS,
        group_name="maple_operations",
        required_resource_keys={"maple_costs", "maple_storage"},
        automation_condition=daily_refresh(cron),
        description="Turnaround and tasks/s of the provider batches created on each of the "
        "recent UTC days (default yesterday and today), per provider and model: percentiles, "
        "charts, HTML report and per-batch CSV per day.",
    )
    def maple_batch_stats(
        context: dg.AssetExecutionContext, config: RecentDays
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        storage: Storage = context.resources.maple_storage.storage()
        days = [_day(context.resources.maple_costs, storage, d) for d in config.window()[::-1]]
        newest = days[0]
        table = ["| day | batches | completed | report |", "|---|---|---|---|"]
        table += [f"| {d.day} | {d.batches} | {d.completed} | {d.report} |" for d in days]
        return dg.MaterializeResult(
            metadata={
                "batches": sum(d.batches for d in days),
                "completed": sum(d.completed for d in days),
                "days": dg.MetadataValue.md("\n".join(table)),
                "stats": dg.MetadataValue.md(
                    "\n\n".join(f"### {d.day}\n\n{d.stats}" for d in days)
                ),
                "report": dg.MetadataValue.path(newest.report),
                "batches_csv": dg.MetadataValue.path(newest.batches_csv),
            }
        )

    return maple_batch_stats


@dataclass(frozen=True)
class DayStats:
    """One UTC day's batches: counts, the Markdown table and charts, its files' URIs."""

    day: date
    batches: int
    completed: int
    stats: str
    report: str
    batches_csv: str


def _day(ledger: CostLedger, storage: Storage, day: date) -> DayStats:
    """The batches created on ``day``: its HTML report and per-batch CSV written under the
    storage root."""
    history = ledger.batch_history(HistoryFilter(since=day, until=day + timedelta(days=1)))
    rows = readable(percentile_table(history))
    pngs = chart_pngs(history)
    page = html_report(f"Maple batch statistics {day}", f"batches created {day} (UTC)", rows, pngs)
    report, batches = batch_stats_report(str(day), "html"), batch_stats_report(str(day), "csv")
    storage.write_bytes(report, page.encode())
    storage.write_bytes(batches, batch_table(history).write_csv().encode())
    return DayStats(
        day, history.height, completed(history).height, markdown_report(rows, pngs),
        storage.uri(report), storage.uri(batches),
    )  # fmt: skip
