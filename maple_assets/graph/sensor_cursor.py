"""The enrichment sensor's cursor: the run keys it asked for last tick.

Dagster drops a run request whose ``run_key`` already ran and logs "Skipping ... already
completed" at INFO, so a sensor that asks for the same runs on every tick (a finished job's
``merged``, a collect whose run is still queued) logs a line per tick per job forever. The
cursor keeps the run keys of the last tick's requests; a request already in it is not sent
again. The cursor holds only what the job still asks for, so it stays small, and it is cleared
of keys the job no longer asks for on the next tick. It also keeps the collect ranges asked for
(``maple_assets.graph.collect_ranges``) while their shards are still to collect, and, for a
provider that pushes batch events, when the sensor last polled every batch.
"""

from typing import Any

import dagster as dg
import orjson


def fresh_requests(
    requests: list[dg.RunRequest], cursor: str | None, keep: dict[str, Any] | None = None
) -> tuple[list[dg.RunRequest], str]:
    """The requests not asked for last tick, and the cursor to store for the next tick (with
    what ``keep`` holds that is not empty: ``collecting`` ranges, ``merging`` run keys)."""
    asked = set(orjson.loads(cursor).get("asked", [])) if cursor else set()
    fresh = [r for r in requests if r.run_key not in asked]
    stored: dict[str, Any] = {"asked": sorted({str(r.run_key) for r in requests})}
    stored |= {k: v for k, v in (keep or {}).items() if v}
    return fresh, orjson.dumps(stored).decode()


def collecting(cursor: str | None) -> dict[str, Any]:
    """The collect ranges the last tick asked for."""
    return dict(orjson.loads(cursor).get("collecting", {})) if cursor else {}


def polled_at(cursor: str | None) -> float | None:
    """When the last tick polled every batch the job waited for (None: not known)."""
    value = orjson.loads(cursor).get("polled_at") if cursor else None
    return float(value) if value is not None else None


def only_polled_at(cursor: str | None) -> str | None:
    """A cursor holding only when every batch was last polled (what the command line's driver
    carries from tick to tick), or None."""
    at = polled_at(cursor)
    return orjson.dumps({"polled_at": at}).decode() if at is not None else None


def merging(cursor: str | None) -> list[str]:
    """The run keys of collect ranges that also materialize ``merged``, still to be seen end."""
    return list(orjson.loads(cursor).get("merging", [])) if cursor else []
