"""The recent UTC days a maintenance asset covers in one materialization, and when it refreshes.

The maintenance assets (``maple_batch_stats``, ``maple_reconcile``) are not partitioned: a
partitioned asset in a code location turns the UI's global "Materialize all" into a partition
picker (one daily partition per day since the start date). Each materialization instead covers
a rolling window, today and the days before it (``days``, default 2: yesterday and today),
ending at ``until`` (a UTC date, default today) when a run's config names an earlier day.
"""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
from pydantic import Field


class RecentDays(dg.Config):
    """The window of a run: ``days`` UTC days ending at ``until`` (default today)."""

    days: int = Field(default=2, ge=1, le=366, description="How many UTC days, up to `until`.")
    until: str | None = Field(
        default=None, description="The last UTC day covered (YYYY-MM-DD); default today."
    )

    def window(self) -> list[date]:
        """The days covered, oldest first; a bad ``until`` is one line naming it."""
        try:
            last = date.fromisoformat(self.until) if self.until else datetime.now(UTC).date()
        except ValueError:
            raise dg.Failure(
                f"until: {self.until!r} is not a date: give a UTC day as YYYY-MM-DD"
            ) from None
        return [last - timedelta(days=n) for n in range(self.days - 1, -1, -1)]


def daily_refresh(cron: str) -> dg.AutomationCondition[Any]:
    """Once each time ``cron`` (UTC) passes (the run covers yesterday and today)."""
    tick: dg.AutomationCondition[Any] = dg.AutomationCondition.cron_tick_passed(cron)
    return tick.since_last_handled().with_label(f"yesterday and today at {cron} UTC")
