"""The assets of one enrichment: input_shards, submissions and raw_responses per shard, merged.

Built by ``maple_assets.factory.enrichment``; each body reads its inputs, calls a step
(``maple_engine.steps``) and returns data plus metadata. The per-shard assets return metadata
only: a shard's state and answers live under the storage root, and ``merged`` reads them there.
"""

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
import polars as pl
import pyarrow as pa
from pydantic import Field

from maple_assets.binding import IO_MANAGER_KEY, job_for
from maple_assets.graph.card import column_lineage, table_metadata
from maple_assets.graph.checks import (
    on_latest,
    reused_shard_failed_rows,
    shard_checks,
    shard_failed_rows,
    shard_failed_rows_spec,
)
from maple_assets.graph.failed_shards import (
    DRIVER_TAG,
    failed_for_good,
    failed_shards,
    failed_shards_failure,
)
from maple_assets.graph.history import earlier_versions
from maple_assets.graph.line_checks import (
    shard_missing_lines,
    shard_missing_lines_spec,
)
from maple_assets.graph.names import JobKeys, dagster_name
from maple_assets.graph.per_shard import per_shard
from maple_assets.graph.shard_options import ShardRunOptions
from maple_assets.graph.shard_partitions import current_partitions
from maple_assets.graph.tags import tag_run
from maple_assets.graph.waiting import wait_until
from maple_engine.canary import last_canary, run_canary
from maple_engine.collect.accounting import describe, missing_for_good
from maple_engine.collect.responses import summarize
from maple_engine.collect.shard_responses import shard_responses
from maple_engine.errors import CanaryFailed
from maple_engine.inputs.sources import scan_output
from maple_engine.job import Job
from maple_engine.memory import give_back
from maple_engine.merge.output import merge_job
from maple_engine.model import ROW_ID, LineTally
from maple_engine.plan.rerun import shard_input
from maple_engine.plan.versions import filled_failures
from maple_engine.policy import RetryPolicy
from maple_engine.spec import JobSpec
from maple_engine.steps import collect_shard, submit_shard
from maple_engine.submit import queue
from maple_engine.submit.budget import ledger_totals
from maple_engine.submit.deadline import deadline_split
from maple_engine.submit.escalation import all_late
from maple_engine.submit.eta import fit_for, job_eta, planned_eta
from maple_engine.submit.sizing import size_shards
from maple_engine.work import Work, pending_work
from resources.dagster_private import ASSET_PARTITION_RANGE_START_TAG as RANGE_START
from resources.dagster_private import BACKFILL_ID_TAG, PARTITION_NAME_TAG

SUBMIT_PARALLELISM = 2  # concurrent uploads in a multi-shard submissions run
# Token figures merged reports as numbers under the keys each shard's raw_responses has (what
# this version sent), for Dagster+ Insights (docs/components.md, "Metadata keys").
INSIGHTS_TOKENS = ("input_tokens", "output_tokens", "reasoning_tokens")


class InputShardsConfig(dg.Config, ShardRunOptions):
    """Run options of ``input_shards`` (the launchpad's config in the UI; ``maple enrich``'s
    ``--retry-failed``). ``no_reuse`` turns off the job option ``reuse`` for one run."""


class SubmissionsConfig(dg.Config):
    """Run options of ``submissions``."""

    wait_for_validation_s: float = Field(
        default=0.0,
        description="While the provider queue's limit is not known yet, send the run's shards "
        "one after another, each once the run's earlier batches pass the provider's validation, "
        "waiting up to this many seconds for it (0: send only what the queue admits now).",
        ge=0,
    )


def input_shards_asset(
    spec: JobSpec,
    policy: RetryPolicy,
    pdef: dg.DynamicPartitionsDefinition,
    keys: set[str],
    upstream: dg.AssetKey | None,
    *,
    key_of: JobKeys,
) -> dg.AssetsDefinition:
    def body(
        context: dg.AssetExecutionContext, config: InputShardsConfig, table: Any
    ) -> Iterator[dg.Output[pl.DataFrame]]:
        run_spec = spec.model_copy(update={"reuse": spec.reuse and not config.no_reuse})
        job = job_for(run_spec, policy, context.resources)
        tag_run(context, spec, job.state)
        try:
            shards, version, counts = shard_input(
                job,
                table,
                retry_failed=config.retry_failed,
                before_planning=run_canary,
                sizer=size_shards,
            )
        except CanaryFailed as exc:  # the run fails before any submission: the UI shows why
            raise dg.Failure(str(exc), metadata=canary_metadata(job), allow_retries=False) from exc
        stages = [key_of(stage) for stage in ("submissions", "raw_responses")]
        current_partitions(context.instance, pdef.name or "", [s.key for s in shards], stages)
        manifest = pl.DataFrame([dataclasses.asdict(s) for s in shards])
        warnings.filterwarnings("ignore", category=dg.BetaWarning)  # data_version is Beta
        yield dg.Output(
            manifest,
            data_version=dg.DataVersion(version.input_digest),
            metadata={
                "rows": counts.rows,
                "to_send": counts.sent,
                # "reused" means one thing everywhere (merged, llm_reused, maple status): rows
                # answered without being sent; of which repeats of another row's request:
                "reused": counts.reused + counts.duplicates,
                "reused_repeats": counts.duplicates,
                "version": version.number,
                **earlier_versions(spec.name, version.number),
                "shards": len(shards),
                "bytes": int(manifest["bytes"].sum()),
                "max_shard_rows": int(manifest.select(pl.col("rows").max()).item()),
                **sizing_metadata(job),
                **canary_metadata(job),
            },
        )
        # after this materialization, so the reused shards' read as up to date with it
        yield from mark_reused_shards(context, job, shards, key_of)

    key = key_of("input_shards")
    description = (
        f"Input of {spec.name} rendered into provider requests and cut into shards; rows whose "
        "request has a stored answer are filled from the response store, not sent."
    )
    if spec.source is not None:  # a file: its observed source asset is the upstream

        @dg.asset(
            key=key,
            group_name=dagster_name(spec.name),
            required_resource_keys=keys,
            io_manager_key=IO_MANAGER_KEY,
            description=description,
            code_version=spec.fingerprint(),
            deps=[upstream] if upstream is not None else None,
        )
        def input_shards(
            context: dg.AssetExecutionContext, config: InputShardsConfig
        ) -> Iterator[dg.Output[pl.DataFrame]]:
            yield from body(context, config, spec.source)

        return input_shards

    @dg.asset(
        key=key,
        group_name=dagster_name(spec.name),
        required_resource_keys=keys,
        io_manager_key=IO_MANAGER_KEY,
        description=description,
        code_version=spec.fingerprint(),
        ins={"table": dg.AssetIn(key=upstream)},
    )
    def input_shards_from_asset(
        context: dg.AssetExecutionContext, config: InputShardsConfig, table: Any
    ) -> Iterator[dg.Output[pl.DataFrame]]:
        if isinstance(table, pl.LazyFrame):
            table = table.collect()
        if not isinstance(table, (pl.DataFrame, pa.Table)):
            table = pl.DataFrame(table)
        yield from body(context, config, table)

    return input_shards_from_asset


def sizing_metadata(job: Job) -> dict[str, Any]:
    """The shard size a deadline or target chose and why (`maple_engine.submit.sizing`)."""
    sizing = (job.state.manifest_record() or {}).get("sizing")
    if not sizing:
        return {}
    return {"shard_size": sizing["size"], "shard_size_reason": sizing["reason"]}


def canary_metadata(job: Job) -> dict[str, Any]:
    """The canary's figures (sample size, success share, top failure), when the job has one."""
    report = last_canary(job.state) if job.spec.canary else None
    return report.metadata() if report is not None else {}


def mark_reused_shards(
    context: dg.AssetExecutionContext, job: Job, shards: list[Any], key_of: JobKeys
) -> Iterator[Any]:
    """A shard whose rows were all answered from the response store sends nothing: its
    submissions and raw_responses partitions are recorded as materialized (0 requests), not
    left Missing to invite a pointless "Materialize missing". Its ``failed_rows`` check reads
    its rows' stored answers; past ``error_failed_share`` (nothing left to retry) its
    raw_responses is observed, not materialized, as a collected shard past it is
    (`maple_assets.graph.failed_shards`): not green, and a run of the partition fails it."""
    reused = [shard for shard in shards if wholly_reused(job, shard.key)]
    if not reused:
        return
    failures = version_failures(job)
    raw_key = key_of("raw_responses")
    for shard in reused:
        checked = reused_shard_failed_rows(job.spec, raw_key, shard, failures)
        # nothing spent, under the keys a collected shard's raw_responses has (Insights)
        spent = {"rows": 0, "rows_failed": 0, "cost_usd": 0.0}  # no request of its own
        spent |= dict.fromkeys(INSIGHTS_TOKENS, 0)
        failed = failed_for_good({shard.key: checked}, {shard.key: {"pending_retry": 0}})
        for stage, more in (("submissions", {}), ("raw_responses", spent)):
            event = dg.AssetObservation if failed and stage == "raw_responses" else None
            yield (event or dg.AssetMaterialization)(
                asset_key=key_of(stage),
                partition=shard.key,
                description="Every row of this shard was answered from the response store.",
                metadata={"requests": 0, "reused": shard.rows, **more},
            )
        yield on_latest(context.instance, checked)
        nothing_sent = shard_missing_lines(raw_key, shard.key, {}, LineTally(), for_good=0)
        yield on_latest(context.instance, nothing_sent)


def wholly_reused(job: Job, shard: str) -> bool:
    """Whether every row of ``shard`` was answered from the response store (nothing sent)."""
    summary = job.state.summary(shard)
    return summary is not None and summary.attempt == 0 and summary.final


def version_failures(job: Job) -> pl.DataFrame:
    """The current version's rows filled from the store whose stored outcome failed."""
    version = job.state.version()
    if version is None:
        return pl.DataFrame(schema={ROW_ID: pl.Int64, "failure_class": pl.String})
    return filled_failures(job.state.storage, job.state.job, version.number)


def current_shards(job: Job) -> set[str]:
    """The shard keys of the job's current version."""
    return {s.key for s in job.state.manifest() or []}


def superseded(job: Job, **figures: int) -> dict[str, Any]:
    """The metadata of a run's partition that is a shard of an earlier version (kept while a
    backfill targets it, `partitions.shards`): nothing is sent or collected for it; the sensor
    runs the current version's shards."""
    version = job.state.version()
    return {**figures, "superseded_by_version": version.number if version else 0}


def _shard_asset(
    spec: JobSpec,
    name: str,
    upstream: str,
    parts: tuple[dg.DynamicPartitionsDefinition, set[str]],
    description: str,
    *,
    key_of: JobKeys,
    check_specs: list[dg.AssetCheckSpec] | None = None,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The decorator of a per-shard asset of the job: its key and upstream, the shard partitions
    and resources (``parts``), the job's IO manager, one run per backfill, the spec's version."""
    pdef, keys = parts
    return dg.asset(
        key=key_of(name),
        group_name=dagster_name(spec.name),
        partitions_def=pdef,
        deps=[key_of(upstream)],
        required_resource_keys=keys,
        io_manager_key=IO_MANAGER_KEY,
        backfill_policy=dg.BackfillPolicy.single_run(),
        code_version=spec.fingerprint(),
        description=description,
        check_specs=check_specs,
    )


def submissions_asset(
    spec: JobSpec,
    policy: RetryPolicy,
    pdef: dg.DynamicPartitionsDefinition,
    keys: set[str],
    key_of: JobKeys,
) -> dg.AssetsDefinition:
    @_shard_asset(
        spec, "submissions", "input_shards", (pdef, keys),
        "The provider batch of each shard attempt, recorded before the next starts.",
        key_of=key_of,
    )  # fmt: skip
    def submissions(
        context: dg.AssetExecutionContext, config: SubmissionsConfig
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        job = job_for(spec, policy, context.resources)
        tag_run(context, spec, job.state)
        job.prepare_submissions()
        current = current_shards(job)
        keys = [k for k in context.partition_keys if k in current]
        wait = config.wait_for_validation_s
        chain = queue.Chain(wait, keys) if wait and job.mode == "batch" else None

        def one(shard: str) -> dict[str, Any]:
            if shard not in current:
                return superseded(job, requests=0)
            submit_shard(job, shard, chain)
            subs = job.state.submissions(shard)  # the record is state/<shard>/submission-<n>
            return {
                "attempts": len(subs),
                "batch_ids": ", ".join(s.batch_id for s in subs),
                "requests": sum(s.request_count for s in subs),
            }

        # With a budget, shards go one by one so each check sees the batch before it.
        # Real-time providers pace one shard at a time against the provider's rate limit.
        # A chain sends in order, each shard after the one before it passed validation.
        # So do the shards a deadline sends through real time: senders side by side in one
        # process would first wait to count each other (`maple_engine.send.rate_shares`).
        late = job.mode == "batch" and all_late(job, keys)
        serial = spec.budget_usd is not None or job.mode == "realtime" or chain is not None
        parallel = 1 if serial or late else SUBMIT_PARALLELISM
        try:
            output = per_shard(context, one, parallel=parallel)
        finally:
            if chain is not None:
                chain.release(job)
        eta = job_eta(job.state, fit_for(job.state, job.costs)).metadata()
        output = dg.MaterializeResult(metadata={**(output.metadata or {}), **eta})
        stop = job.state.stop_reason()
        if stop:
            context.log.warning(f"job {spec.name} stopped submitting: {stop}")
            output = dg.MaterializeResult(metadata={**(output.metadata or {}), "stopped": stop})
        return output

    return submissions


def raw_responses_asset(
    spec: JobSpec,
    policy: RetryPolicy,
    pdef: dg.DynamicPartitionsDefinition,
    keys: set[str],
    key_of: JobKeys,
) -> dg.AssetsDefinition:
    key = key_of("raw_responses")

    @_shard_asset(
        spec, "raw_responses", "submissions", (pdef, keys),
        "The shard's batch collected: final answers into the response store, retries planned; "
        "metadata: outcomes, tokens, cost (the answers are not copied by the IO manager).",
        key_of=key_of,
        check_specs=[shard_failed_rows_spec(spec, key, pdef), shard_missing_lines_spec(key, pdef)],
    )  # fmt: skip
    def raw_responses(context: dg.AssetExecutionContext) -> Iterator[Any]:
        job = job_for(spec, policy, context.resources)
        tag_run(context, spec, job.state)
        current = current_shards(job)
        waiting = [job.state.progress(k).submission for k in context.partition_keys if k in current]
        subs = [s for s in waiting if s is not None]
        states = job.poll(subs)
        wanted = set(context.partition_keys)
        shards = [s for s in job.state.manifest() or [] if s.key in wanted]
        reused = {s.key: s for s in shards if wholly_reused(job, s.key)}
        failures = version_failures(job) if reused else None
        checked: dict[str, dg.AssetCheckEvaluation] = {}
        accounted: dict[str, dg.AssetCheckEvaluation] = {}
        figures: dict[str, dict[str, Any]] = {}

        def one(shard: str) -> dict[str, Any]:
            if shard not in current:
                return superseded(job, rows=0)
            progress = job.state.progress(shard)
            if progress.action == "wait" and progress.submission is not None:
                state = states[progress.submission.batch_id]
                if not state.ended:
                    raise dg.Failure(
                        f"Batch {state.batch_id} of shard {shard} is still {state.status}; the "
                        f"{dagster_name(spec.name)}_sensor materializes this partition when the "
                        "batch ends."
                    )
                combined = collect_shard(job, shard, state)
                if spec.kind.answer == "vector":  # 80 MB of parsed vectors per 50k at 256 dims
                    give_back()  # returned before the next shard's, not kept by the allocators
            else:
                combined = shard_responses(job.state, shard)
            metadata = _responses_metadata(job, shard, combined)
            by_class, pending = metadata["failed_by_class"].value, metadata["pending_retry"]
            if failures is not None and shard in reused:  # nothing sent: its stored answers
                checked[shard] = reused_shard_failed_rows(spec, key, reused[shard], failures)
            else:
                rows = metadata["rows"]
                checked[shard] = shard_failed_rows(
                    spec, key, shard, rows, by_class, pending=pending
                )
            for_good = missing_for_good(combined, job.policy, job.state.is_stopped())
            tally = _tally(job, shard)
            accounted[shard] = shard_missing_lines(key, shard, metadata, tally, for_good)
            figures[shard] = metadata
            return metadata

        outcome = per_shard(context, one, parallel=spec.kind.collect_parallelism)
        keys = [k for k in context.partition_keys if k in checked]
        evaluations = [checked[k] for k in keys] + [accounted[k] for k in keys]
        failed = [] if DRIVER_TAG in context.run.tags else failed_for_good(checked, figures)
        if not failed:
            yield outcome
            yield from shard_checks(context, evaluations)
            return
        yield from failed_shards(context, key, figures, failed)
        yield from shard_checks(context, evaluations)
        raise failed_shards_failure(context, failed, checked)

    return raw_responses


def _tally(job: Job, shard: str) -> LineTally:
    summary = job.state.summary(shard)
    return summary.tally() if summary is not None else LineTally()


def _responses_metadata(job: Job, shard: str, combined: pl.DataFrame) -> dict[str, Any]:
    info = summarize(combined)
    summary = job.state.summary(shard)
    return {
        **{k: v for k, v in info.items() if k != "failed_by_class"},
        "lines": describe(info),  # sent N, answered A, failed F, missing M
        **_tally(job, shard).figures(),
        "rows_failed": info["failed"],  # the key merged has too (docs/components.md)
        "cost_usd": round(info["cost_usd"], 6),  # micro-dollars
        "failed_by_class": dg.MetadataValue.json(info["failed_by_class"]),
        "failed_share": round(info["failed"] / info["rows"], 6) if info["rows"] else 0.0,
        "pending_retry": summary.pending_retry if summary else 0,
        "batch_ids": ", ".join(s.batch_id for s in job.state.submissions(shard)),
    }


def merged_asset(
    spec: JobSpec,
    policy: RetryPolicy,
    keys: set[str],
    key_of: JobKeys,
    *,
    poll_interval_s: float = 30,
    upstream: dg.AssetKey | None = None,
    after_input: bool = False,
) -> dg.AssetsDefinition:
    """The job's output (``after_input``: also downstream of input_shards, so a run of both
    materializes input_shards first)."""
    stages = ["raw_responses", *(["input_shards"] if after_input else [])]

    @dg.asset(
        key=key_of("merged"),
        group_name=dagster_name(spec.name),
        deps=[key_of(stage) for stage in stages],
        required_resource_keys=keys,
        io_manager_key=IO_MANAGER_KEY,
        code_version=spec.fingerprint(),
        description="The input table, unchanged and in order, with the model's answers (llm_*).",
        output_required=False,  # skipped after a last collect in its run that planned retries
    )
    def merged(context: dg.AssetExecutionContext) -> Iterator[dg.Output[Any]]:
        job = job_for(spec, policy, context.resources)
        tag_run(context, spec, job.state)
        work = pending_work(job)
        if not work.finished:
            left = f"{work.total - work.done} of {work.total} shards of {spec.name} are not final"
            if RANGE_START in context.run.tags:  # the shards' last collect run, merging after
                context.log.info(f"{left}: retries to come; merged waits for them")
                return  # the sensor asks for merged when they are final
            # "Materialize all": a backfill, or a run of one partition (a stand-in or an earlier
            # version's, shard_partitions) with merged: wait for the sensor
            if BACKFILL_ID_TAG in context.run.tags or PARTITION_NAME_TAG in context.run.tags:
                work = wait_for_shards(context, job, poll_interval_s)
            if not work.finished:
                raise dg.Failure(f"{left} yet; the sensor materializes merged once every shard is.")
        table = merge_job(job)
        totals = _totals(job)
        s3 = context.resources.maple_storage.s3_settings()
        schema = scan_output(table.path, s3).collect_schema()
        metadata = {
            "path": table.path,
            "rows": table.rows,
            **totals,
            **row_figures(job, table.path, table.rows, s3),
            **planned_eta(job.state),
        }
        lineage = column_lineage(spec, schema, upstream) if upstream is not None else {}
        yield dg.Output(
            table,
            metadata={**metadata, **table_metadata(schema, table.rows, table.path), **lineage},
        )

    return merged


def wait_for_shards(context: dg.AssetExecutionContext, job: Job, interval_s: float) -> Work:
    """In a backfill or a run of one partition ("Materialize all"), merged waits while the
    enrichment's sensor sends and collects the current version's shards (the version the run's
    own input_shards cut, whose partitions the run, stored before, does not target), then
    merges: the run ends with merged materialized. Progress goes to the run's log once a minute."""
    found = [pending_work(job)]

    def ready() -> bool:
        work = found[0] = pending_work(job)
        return work.finished or work.total == 0 or job.state.stop_reason() is not None

    def waiting() -> str:
        return (
            f"{found[0].done} of {found[0].total} shards of {job.spec.name} final; waiting for "
            f"{dagster_name(job.spec.name)}_sensor to bring the rest (it must be running)"
        )

    wait_until(context, ready, waiting, interval_s)
    return found[0]


def row_figures(job: Job, path: str, rows: int, s3: Any) -> dict[str, int]:
    """merged's failed rows, and how its rows reconcile with its shards': ``rows`` = the
    shards' ``rows`` (their requests' answers, as each shard's raw_responses counts them) +
    ``repeat_and_reused_rows`` (rows with no request of their own in this version's shards: a
    repeat of another row's request, an answer reused from the store); the same for failed."""
    failed = scan_output(path, s3).select((pl.col("llm_status") == "failed").sum()).collect()
    rows_failed = int(failed.item() or 0)
    summaries = [job.state.summary(s.key) for s in job.state.manifest() or []]
    answered = sum(s.succeeded + s.failed for s in summaries if s is not None)
    failed_in_shards = sum(s.failed for s in summaries if s is not None)
    return {
        "rows_failed": rows_failed,
        "repeat_and_reused_rows": rows - answered,
        "repeat_and_reused_rows_failed": rows_failed - failed_in_shards,
    }


def _totals(job: Job) -> dict[str, Any]:
    """The run's totals as the merge counted them (cost: this run's new spend)."""
    merged = job.state.merged_record() or {}
    totals = merged.get("totals") or {}
    shards = {s.key for s in job.state.manifest() or []}
    return {
        "succeeded": int(totals.get("succeeded", 0)),
        "failed": int(totals.get("failed", 0)),
        "sent": int(totals.get("sent", 0)),
        "reused": int(totals.get("reused", 0)),
        "cost_usd": round(float(totals.get("cost_usd", 0.0)), 6),
        **{name: int(totals.get(name, 0)) for name in INSIGHTS_TOKENS},
        **ledger_totals(job.costs, job.spec.name, shards),
        **({"budget_usd": job.spec.budget_usd} if job.spec.budget_usd is not None else {}),
        **(
            deadline_split(job.costs, job.spec.name, shards, job.price())
            if job.spec.deadline_s
            else {}
        ),
        "stopped": job.state.stop_reason() or "",
    }
