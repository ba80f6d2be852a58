"""A step of a backfill ("Materialize all") that waits for the sensors to bring what it needs,
saying in its run's log, once a minute, what it waits for."""

import time
from collections.abc import Callable

import dagster as dg

#: how often a waiting step says so in its run's log
SAY_EVERY_S = 60.0


def wait_until(
    context: dg.AssetExecutionContext,
    ready: Callable[[], bool],
    waiting: Callable[[], str],
    interval_s: float,
) -> None:
    """Look every ``interval_s`` (a second at least) until ``ready()``; log ``waiting()``
    once a minute meanwhile."""
    said = 0.0
    while not ready():
        if time.monotonic() - said >= SAY_EVERY_S:
            context.log.info(waiting())
            said = time.monotonic()
        time.sleep(max(1.0, interval_s))
