"""The enrichment sensor's collect runs: the batches that ended by one tick go in one run per
contiguous range of shards (``raw_responses`` takes a partition range in one run), not in a run
each. Each run's start-up (a process that loads the code location) costs seconds; three shards
collected in three runs side by side on a small machine end later than in one.

A range run collects its shards one after another. A tick while it runs still sees the shards it
has not reached as ended batches to collect; the range it asked for is kept in the sensor's
cursor (its run key, first and last shard, and the shards' own collect keys), and such a tick
asks for that same range again (Dagster and the cursor drop it as already asked) instead of a
new run for the rest. A shard whose batch changes (a retry's batch) has a new collect key and is
not held by the old range.

When the ended batches are the job's last (every other shard is final), under the daemon, the
one range run also materializes ``merged`` after them (one run, one start-up, one tick less):
``merged`` then skips itself if the collect planned retries. While that run is queued or running
the sensor does not ask for ``merged`` on its own, and after it, not for the results it merged
(the merged record names them: ``maple_engine.work.generation``).
"""

import hashlib
from collections.abc import Sequence
from typing import Any

import dagster as dg

from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)
from resources.dagster_private import RUN_KEY_TAG

#: Shards one collect run takes: more ended batches go in several runs, side by side.
RANGE_SHARDS = 16

Held = dict[str, dict[str, Any]]  # range run key -> {"first", "last", "members": collect keys}


def gather_collects(
    requests: list[dg.RunRequest],
    raw_key: dg.AssetKey,
    order: Sequence[str] | None,
    held: Held,
    then: dg.AssetKey | None = None,
) -> tuple[list[dg.RunRequest], Held]:
    """``requests`` with the single-shard collect runs of consecutive shards (in ``order``, the
    shard partitions) as range runs, and the ranges asked for now (for the cursor). ``then``:
    the job's ``merged``, when these collects are its last; if they make one range, its run
    materializes ``then`` too. Without an order (a context with no instance) the requests are
    returned as they are."""
    singles = {
        str(r.run_key): r
        for r in requests
        if r.asset_selection == [raw_key] and r.partition_key and RANGE_START not in r.tags
    }
    if not order or not singles:
        return requests, {}
    others = [r for r in requests if str(r.run_key) not in singles]
    asked: Held = {}
    ranges: list[dg.RunRequest] = []
    for key, record in held.items():  # a range still collecting: the same run, asked again
        members = [m for m in record["members"] if m in singles]
        if members:
            asked[key] = record
            ranges.append(_range(key, record, singles[members[0]]))
            for member in members:
                del singles[member]
    position = {shard: i for i, shard in enumerate(order)}
    by_shard = sorted(singles.values(), key=lambda r: position.get(str(r.partition_key), -1))
    runs = _contiguous(by_shard, position)
    last = then is not None and not held and len(runs) == 1
    for run in runs:
        if len(run) == 1 and not last:
            ranges.append(run[0])
            continue
        members = [str(r.run_key) for r in run]
        record = {"first": run[0].partition_key, "last": run[-1].partition_key, "members": members}
        if last:
            record["then"] = then.to_user_string()  # type: ignore[union-attr]
        key = _range_key(str(run[0].run_key), record)
        asked[key] = record
        ranges.append(_range(key, record, run[0]))
    return others + ranges, asked


def _contiguous(
    requests: list[dg.RunRequest], position: dict[str, int]
) -> list[list[dg.RunRequest]]:
    """The requests cut where the shards' order has a gap, at most ``RANGE_SHARDS`` each."""
    runs: list[list[dg.RunRequest]] = []
    for request in requests:
        at = position.get(str(request.partition_key))
        last = runs[-1][-1] if runs else None
        follows = (
            last is not None and at is not None and at - 1 == position.get(str(last.partition_key))
        )
        if follows and len(runs[-1]) < RANGE_SHARDS:
            runs[-1].append(request)
        else:
            runs.append([request])
    return runs


def _range_key(first_key: str, record: dict[str, Any]) -> str:
    """``<job>:<first>..<last>:collect:<digest of the shards' collect keys>``."""
    name = first_key.split(":", 1)[0]
    digest = hashlib.sha256("\n".join(record["members"]).encode()).hexdigest()[:12]
    stage = "collect+merged" if "then" in record else "collect"
    return f"{name}:{record['first']}..{record['last']}:{stage}:{digest}"


def _range(key: str, record: dict[str, Any], like: dg.RunRequest) -> dg.RunRequest:
    """The range run ``key`` over ``record``'s shards, with the tags of ``like`` (one of them)."""
    then = [dg.AssetKey.from_user_string(record["then"])] if "then" in record else []
    return dg.RunRequest(
        run_key=key,
        asset_selection=[*(like.asset_selection or []), *then],
        tags={**like.tags, RANGE_START: record["first"], RANGE_END: record["last"]},
    )


def in_flight(instance: dg.DagsterInstance | None, keys: list[str]) -> bool:
    """Whether a run of one of ``keys`` is queued, starting or running."""
    if instance is None or not keys:
        return False
    records = instance.get_run_records(dg.RunsFilter(tags={RUN_KEY_TAG: keys}))
    return any(not r.dagster_run.is_finished for r in records)
