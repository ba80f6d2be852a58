"""A distilled job's own sensor (``NAME_distill_sensor``): the rounds the asset graph cannot
draw as edges, asked for once the LLM job has merged. From the instance's materializations
alone (no file is read, no provider called):

- the embedding job merged after the last ``distill_rows`` (or before any), and the LLM job
  merged since that one (no round in flight): a run of ``distill_rows`` and the LLM job's
  ``input_shards`` (the round the stored answers call for);
- the LLM job merged after a ``distill_rows`` of the sample: a run of ``distill_rows`` and the
  LLM job's ``input_shards`` (the next round: the unsure rows; the LLM job's sensor sends them);
- the LLM job merged after a ``distill_rows`` of the unsure rows, and ``distilled`` is older: a
  run of ``distilled``.

With the daemon running, a job materialized from the UI (its group, or its embedding job's
``input_shards``) thus reaches ``distilled``; each request's run key names the LLM job's merge
it follows, so Dagster starts it once. What an unfinished backfill will materialize
(``distill_rows`` of the sample's round, ``distilled``) is left to it."""

from collections.abc import Iterator

import dagster as dg

from maple_assets.graph.names import JobKeys, dagster_name
from maple_assets.graph.will_materialize import backfill_will_run

#: the distilled job's own assets: the LLM job's input, and the job's output
ROWS, DISTILLED = "distill_rows", "distilled"


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey) -> "dg.EventLogRecord | None":
    records = instance.fetch_materializations(key, limit=1).records
    return records[0] if records else None


def unsure_answered(instance: dg.DagsterInstance, rows: dg.AssetKey, merged: dg.AssetKey) -> bool:
    """Whether the LLM job has merged after a ``distill_rows`` of the unsure rows."""
    given, answered = _latest(instance, rows), _latest(instance, merged)
    if given is None or answered is None or answered.storage_id < given.storage_id:
        return False
    event = given.asset_materialization
    return event is not None and event.metadata["stage"].value == "unsure"


def distill_sensor(name: str, embedding: str, *, interval: int) -> dg.SensorDefinition:
    """The sensor of the distilled job ``name`` whose embedding job is ``embedding``."""
    embedded, rows = JobKeys(embedding)("merged"), JobKeys(name)(ROWS)
    shards, merged = JobKeys(name)("input_shards"), JobKeys(name)("merged")
    distilled = JobKeys(name)(DISTILLED)

    @dg.sensor(
        name=f"{dagster_name(name)}_distill_sensor",
        minimum_interval_seconds=interval,
        asset_selection=[rows, shards, distilled],
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Asks for {name}'s next round (the unsure rows) and its output.",
    )
    def sensor(context: dg.SensorEvaluationContext) -> Iterator[dg.RunRequest | dg.SkipReason]:
        given, answered = _latest(context.instance, rows), _latest(context.instance, merged)
        vectors = _latest(context.instance, embedded)
        # new vectors since the last round, and no round in flight (the LLM job merged since)
        ahead = given is None or (
            vectors is not None
            and given.storage_id < vectors.storage_id
            and answered is not None
            and given.storage_id < answered.storage_id
        )
        if vectors is not None and ahead and not backfill_will_run(context.instance, rows):
            yield dg.RunRequest(
                run_key=f"{name}:sample:{vectors.storage_id}", asset_selection=[rows, shards]
            )
            return
        if given is None or answered is None or answered.storage_id < given.storage_id:
            yield dg.SkipReason(f"the LLM job {name} has not merged the rows it was last given")
            return
        event = given.asset_materialization
        stage = event.metadata["stage"].value if event is not None else None
        if stage == "sample":
            yield dg.RunRequest(
                run_key=f"{name}:unsure:{answered.storage_id}", asset_selection=[rows, shards]
            )
            return
        written = _latest(context.instance, distilled)
        if backfill_will_run(context.instance, distilled):
            yield dg.SkipReason(f"a backfill writes {name}'s output once the rounds are done")
        elif written is None or written.storage_id < answered.storage_id:
            yield dg.RunRequest(
                run_key=f"{name}:distilled:{answered.storage_id}", asset_selection=[distilled]
            )

    return sensor
