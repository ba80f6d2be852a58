"""The sensor of one enrichment: polls the provider and requests the runs each shard needs.

For a provider that pushes batch events (`maple webhooks`), the sensor ticks every
``EVENT_TICK_S`` (under the daemon) but polls every batch only when its poll interval has
passed since it last did, or when a shard is to be submitted; a tick in between polls only the
batches whose end an event announced, and asks for their collect runs at once (or polls nothing
and skips). A poll interval shorter than ``EVENT_TICK_S`` polls every batch on every tick."""

import time
from collections.abc import Sequence

import dagster as dg

from maple_assets.binding import job_for
from maple_assets.graph.admission import (
    CHAIN_WAIT_S,
    Admitted,
    chain_after,
    plan_submissions,
    wait_message,
    wait_note,
)
from maple_assets.graph.collect_ranges import gather_collects, in_flight
from maple_assets.graph.engine_log import engine_log_to
from maple_assets.graph.listed import ListedStorage
from maple_assets.graph.names import dagster_name
from maple_assets.graph.revive import revive
from maple_assets.graph.sensor_cursor import collecting, fresh_requests, merging, polled_at
from maple_assets.graph.shard_partitions import BEFORE_FIRST_CUT, current_partitions
from maple_assets.graph.tags import run_tags
from maple_assets.graph.will_materialize import backfill_will_run, partition_run_will_run
from maple_engine.collect.retention import job_expiring
from maple_engine.job import Job
from maple_engine.policy import RetryPolicy
from maple_engine.providers.registry import known_capabilities
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.submit import queue
from maple_engine.submit.budget import resume_budget_stop
from maple_engine.work import Work, generation, merged_for, only_left, pending_work, pushed
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)

#: How long the sensor holds the shards of a chained run it asked for until that run's first
#: shard holds them itself (the run's launch: a run worker, a code server's answer).
CHAIN_LAUNCH_S = 60.0
#: How often the sensor of a provider that pushes batch events looks for them (a listing under
#: the storage root, no provider call).
EVENT_TICK_S = 5


def enrichment_sensor(
    spec: JobSpec,
    policy: RetryPolicy,
    assets: Sequence[dg.AssetsDefinition],
    keys: set[str],
    interval: int,
) -> dg.SensorDefinition:
    submissions_key, raw_key, merged_key = (a.key for a in assets[1:])
    pdef = assets[1].partitions_def
    pdef_name = pdef.name if isinstance(pdef, dg.DynamicPartitionsDefinition) else None
    capabilities = known_capabilities(spec.provider)
    pushes = (
        capabilities is not None and capabilities.mode == "batch" and bool(capabilities.webhooks)
    )

    @dg.sensor(
        name=f"{dagster_name(spec.name)}_sensor",
        minimum_interval_seconds=min(interval, EVENT_TICK_S) if pushes else interval,
        asset_selection=[submissions_key, raw_key, merged_key],
        required_resource_keys=keys,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Polls the provider for {spec.name} and requests the next runs.",
    )
    def enrichment_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        with engine_log_to(context.log):
            return _tick(context)

    def _tick(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        job = job_for(spec, policy, context.resources)
        last = polled_at(context.cursor)
        due = last is None or time.time() - last >= interval - EVENT_TICK_S / 2
        # One listing of the job's state answers the tick's reads (maple_assets.graph.listed).
        job.state = JobState(ListedStorage(job.state.storage, job.state.paths.state()), spec.name)
        lifted = resume_budget_stop(job.state, spec.budget_usd)
        if lifted:
            context.log.info(f"budget raised to {spec.budget_usd}: resuming ({lifted})")
        instance = _instance(context)
        order = instance.get_dynamic_partitions(pdef_name) if instance and pdef_name else None
        if order == [] and pdef_name and job.state.manifest() is None:  # shard_partitions
            add = dg.AddDynamicPartitionsRequest(pdef_name, [BEFORE_FIRST_CUT])
            return dg.SensorResult(dynamic_partitions_requests=[add], cursor=context.cursor)
        if instance and pdef_name and order:
            order = _drop_superseded(job, instance, pdef_name, order, [submissions_key, raw_key])
        work = pending_work(job, None if due or not pushes else pushed(job))
        wanted = run_requests(job, submissions_key, raw_key, merged_key, order, work=work)
        # Under the daemon the job's last collect run materializes merged too (the CLI's driver
        # collects and merges itself): maple_assets.graph.collect_ranges.
        daemon = bool(context.log_key)
        then = merged_key if daemon and _last_collects(job, wanted, raw_key) else None
        merges = then is not None or any(r.asset_selection == [merged_key] for r in wanted)
        if merges and instance and _merging_elsewhere(instance, merged_key, order or []):
            then = None  # a "Materialize all" merges once all are final
            wanted = [r for r in wanted if r.asset_selection != [merged_key]]
        held = collecting(context.cursor)
        wanted, ranges = gather_collects(wanted, raw_key, order, held, then)
        busy = [k for k in merging(context.cursor) if in_flight(instance, [k])]
        busy += [k for k, record in ranges.items() if "then" in record and k not in busy]
        if daemon and (busy or merged_for(job)):  # merged by a collect run, or soon
            wanted = [r for r in wanted if r.asset_selection != [merged_key]]
        wanted, revived = revive(instance, wanted)  # runs that died for good
        for line in revived:
            context.log.warning(f"{spec.name}: {line}")
        polled = (last if work.partial else time.time()) if pushes else None
        keep = {"collecting": ranges, "merging": busy, "polled_at": polled}
        fresh, cursor = fresh_requests(wanted, context.cursor, keep)
        if any(RANGE_START in r.tags and r.asset_selection == [submissions_key] for r in fresh):
            job.state.hold_chain(time.time() + CHAIN_LAUNCH_S)  # until its first shard holds
        for expiring in job_expiring(job.state, spec.provider):  # collect them before they go
            context.log.warning(f"{spec.name}: {expiring.describe()}")
        waiting = wait_message(wait_note(job))
        if waiting and context.log_key:  # the daemon keeps tick logs; the CLI has its own line
            context.log.info(f"{spec.name}: {waiting}")
        skip = waiting if waiting and not fresh else None
        return dg.SensorResult(run_requests=fresh, cursor=cursor, skip_reason=skip)

    return enrichment_sensor


def _drop_superseded(
    job: Job,
    instance: dg.DagsterInstance,
    pdef_name: str,
    order: Sequence[str],
    stages: list[dg.AssetKey],
) -> Sequence[str]:
    """The shard partitions once an earlier version's, kept for a backfill that targeted them
    (`partitions.shards`), are gone where no unfinished backfill targets them any more."""
    manifest = job.state.manifest()
    current = [s.key for s in manifest or []]
    if manifest is None or set(order) <= set(current):
        return order
    current_partitions(instance, pdef_name, current, stages)
    return instance.get_dynamic_partitions(pdef_name)


def _merging_elsewhere(
    instance: dg.DagsterInstance, merged_key: dg.AssetKey, partitions: Sequence[str]
) -> bool:
    """Whether a "Materialize all" under way will materialize merged: an unfinished backfill,
    or an unfinished run of one of the job's shard ``partitions`` (`will_materialize`)."""
    return backfill_will_run(instance, merged_key) or partition_run_will_run(
        instance, merged_key, partitions
    )


def _last_collects(job: Job, requests: list[dg.RunRequest], raw_key: dg.AssetKey) -> bool:
    """Whether the collect runs asked for are the job's last: every other shard is final."""
    collecting = {str(r.partition_key) for r in requests if r.asset_selection == [raw_key]}
    if not collecting or any(r.asset_selection != [raw_key] for r in requests):
        return False
    return only_left(job, collecting)


def _instance(context: dg.SensorEvaluationContext) -> dg.DagsterInstance | None:
    try:
        return context.instance
    except dg.DagsterInvariantViolationError:  # a context built under test, with no instance
        return None


def run_requests(
    job: Job,
    submissions_key: dg.AssetKey,
    raw_key: dg.AssetKey,
    merged_key: dg.AssetKey,
    order: Sequence[str] | None = None,
    *,
    work: Work | None = None,
) -> list[dg.RunRequest]:
    """The runs a job needs now; run keys are deterministic so a request is never doubled.
    ``order``: the shard partitions in order (None: no chained run, each shard its own);
    ``work``: what the job needs, polled already (default: every batch polled now)."""
    work = work or pending_work(job)
    name = job.spec.name
    tags = run_tags(job.spec, job.state)
    # the queue's room and the deadline decide, from every batch's state
    admitted = Admitted({}, []) if work.partial else plan_submissions(job, work)
    # a chain follows the last shard admitted into the queue (late ones take no queue room)
    shards = [s for s, ticket in admitted.tickets.items() if ticket != queue.LATE]
    chained = chain_after(shards, admitted.validating, list(order or []))
    requests = [
        dg.RunRequest(
            run_key=f"{name}:{shard}:submit:{job.state.progress(shard).attempt}{ticket}",
            asset_selection=[submissions_key],
            partition_key=shard,
            tags=tags,
        )
        for shard, ticket in admitted.tickets.items()
        if not (chained and shard == shards[-1])
    ]
    if chained:  # the last admitted shard's run sends the ones that wait for validation after it
        first, last = shards[-1], chained[-1]
        attempt = job.state.progress(first).attempt
        requests.append(
            dg.RunRequest(
                run_key=f"{name}:{first}..{last}:submit:{attempt}{admitted.tickets[first]}",
                asset_selection=[submissions_key],
                tags={**tags, RANGE_START: first, RANGE_END: last},
                run_config={
                    "ops": {
                        "__".join(submissions_key.path): {
                            "config": {"wait_for_validation_s": CHAIN_WAIT_S}
                        }
                    }
                },
            )
        )
    requests += [
        dg.RunRequest(
            run_key=f"{name}:{shard}:collect:{sub.batch_id}:{sub.attempt}",
            asset_selection=[raw_key],
            partition_key=shard,
            tags=tags,
        )
        for shard, sub, _ in work.collect
    ]
    if work.finished:
        requests.append(
            dg.RunRequest(
                run_key=f"{name}:merged:{generation(job)}",
                asset_selection=[merged_key],
                tags=tags,
            )
        )
    return requests
