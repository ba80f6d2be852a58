"""Run requests whose runs died: ask again under a new run key.

The sensor's run keys are deterministic (``alpha:s00000:submit:1q...``), so Dagster never starts
the same request twice. The other side of that: once a run with the key has failed for good (its
worker was killed and run retries were off, exhausted, or found nothing left to retry), the key
is spent and the shard would wait forever, holding its room in the provider queue. Each tick,
one query finds the runs of the keys the sensor asks for; a key whose runs all failed or were
cancelled, none still to be retried by Dagster, is asked again as ``<key>:after-<run id>``. Maple's
steps are idempotent, so a request asked again pays for nothing twice. A key revived
`MAX_REVIVALS` times is left alone (a step that fails every time needs a person, not a loop).
"""

import time
from collections.abc import Sequence

import dagster as dg

from resources.dagster_private import AUTO_RETRY_RUN_ID_TAG, RUN_KEY_TAG, WILL_RETRY_TAG

MAX_REVIVALS = 3
RETRY_GRACE_S = 60.0  # a failed run not yet marked will_retry=true/false: Dagster still decides
_DEAD = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
_MARK = ":after-"


def revive(
    instance: dg.DagsterInstance | None, requests: Sequence[dg.RunRequest]
) -> tuple[list[dg.RunRequest], list[str]]:
    """The requests, each under the key of its newest live incarnation, and a line per request
    asked again (for the tick's log)."""
    keys = {str(r.run_key): str(r.run_key) for r in requests if r.run_key}
    notes: list[str] = []
    pending = dict(keys)  # original key -> key to look up next
    for _ in range(MAX_REVIVALS):
        if instance is None or not pending:
            break
        dead = _dead_runs(instance, list(pending.values()))
        pending = {o: k for o, k in pending.items() if k in dead}
        for original, spent in pending.items():
            key = keys[original] = pending[original] = f"{spent}{_MARK}{dead[spent][:8]}"
            notes.append(f"run {dead[spent]} failed, no retry to come: asking again as {key}")
    revived = [
        r.with_replaced_attrs(run_key=keys[str(r.run_key)]) if r.run_key else r for r in requests
    ]
    return revived, notes


def _dead_runs(instance: dg.DagsterInstance, keys: list[str]) -> dict[str, str]:
    """Of ``keys``, those whose runs all failed or were cancelled with no retry to come: key ->
    the newest run's id. Keys never run are not dead."""
    by_key: dict[str, list[dg.RunRecord]] = {}
    for record in instance.get_run_records(dg.RunsFilter(tags={RUN_KEY_TAG: keys})):
        by_key.setdefault(record.dagster_run.tags.get(RUN_KEY_TAG, ""), []).append(record)
    dead = {}
    for key, records in by_key.items():
        if key in keys and all(_finished_for_good(r) for r in records):
            newest = max(records, key=lambda r: r.create_timestamp)
            dead[key] = newest.dagster_run.run_id
    return dead


def _finished_for_good(record: dg.RunRecord) -> bool:
    run = record.dagster_run
    if run.status not in _DEAD:
        return False  # running, queued, or it succeeded: the key did its work
    will_retry = run.tags.get(WILL_RETRY_TAG)
    if will_retry == "true":  # Dagster retries it; the retry run carries the same key
        return AUTO_RETRY_RUN_ID_TAG in run.tags  # launched: the retry's own record decides
    if will_retry is None:  # Dagster has not decided yet (or run retries are off)
        ended = record.end_time or record.update_timestamp.timestamp()
        return time.time() - ended > RETRY_GRACE_S
    return True
