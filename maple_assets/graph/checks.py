"""Asset checks: every input row once in ``merged``, the same rows as the input table, every
row final, the failed share, no shard over the limits."""

import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

import dagster as dg
import numpy as np
import polars as pl

from maple_assets.graph.names import JobKeys
from maple_engine.inputs.sources import scan
from maple_engine.model import ROW_ID, ShardInfo
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from resources.dagster_private import AssetCheckEvaluationTargetMaterializationData

DIGEST_ROWS = 500_000  # rows digested at a time, per side
_NONE = np.empty(0, np.uint64)
FAILED_ROWS = "failed_rows"


def not_yet_evaluated(runs: str) -> str:
    """The sentence every check's description ends with: when it ``runs``, and that before
    then it is not yet evaluated (not passed)."""
    return f"Runs {runs}; until then, not yet evaluated."


UNTIL_MERGED = not_yet_evaluated("after each materialization of merged")


def _state(spec: JobSpec, context: dg.AssetCheckExecutionContext) -> JobState:
    return JobState(context.resources.maple_storage.storage(), spec.name)


def build_checks(
    spec: JobSpec,
    keys: set[str],
    key_of: JobKeys,
    table_key: dg.AssetKey | None = None,
    blocking: bool = False,
) -> list[dg.AssetChecksDefinition]:
    """The job's checks; ``table_key``: the upstream asset whose table is the input (None when
    the input is the file ``spec.source``); ``blocking``: merged's ``failed_rows`` failing at
    ERROR stops merged's downstream assets in the same run."""
    merged_key = key_of("merged")
    shards_key = key_of("input_shards")
    same_rows = same_rows_check(spec, keys, merged_key, table_key)

    @dg.asset_check(
        asset=merged_key,
        name="every_row_once",
        required_resource_keys=keys,
        description=f"Every input row appears exactly once in merged. {UNTIL_MERGED}",
    )
    def every_row_once(
        context: dg.AssetCheckExecutionContext, merged: pl.LazyFrame
    ) -> dg.AssetCheckResult:
        state = _state(spec, context)
        expected = sum(s.rows for s in state.manifest() or []) + state.unsharded_rows()
        got = int(merged.select(pl.len()).collect().item())
        return dg.AssetCheckResult(
            passed=got == expected, metadata={"expected": expected, "rows": got}
        )

    @dg.asset_check(
        asset=merged_key,
        name="every_row_final",
        required_resource_keys=keys,
        description=f"Every row is succeeded, or failed with a failure class. {UNTIL_MERGED}",
    )
    def every_row_final(
        context: dg.AssetCheckExecutionContext, merged: pl.LazyFrame
    ) -> dg.AssetCheckResult:
        bad = (
            merged.filter(
                ~pl.col("llm_status").is_in(["succeeded", "failed"])
                | ((pl.col("llm_status") == "failed") & pl.col("llm_failure_class").is_null())
            )
            .select(pl.len())
            .collect()
            .item()
        )
        return dg.AssetCheckResult(passed=bad == 0, metadata={"rows_not_final": int(bad)})

    @dg.asset_check(
        asset=merged_key,
        name="failed_rows",
        blocking=blocking,
        description="The share of failed rows stays within max_failed_share (WARN) and "
        "error_failed_share (ERROR); the result names the failure classes and their counts. "
        + UNTIL_MERGED,
    )
    def failed_rows(merged: pl.LazyFrame) -> dg.AssetCheckResult:
        return failed_rows_result(spec, merged)

    @dg.asset_check(
        asset=shards_key,
        name="shards_within_limits",
        required_resource_keys=keys,
        description="No shard exceeds the request-count or byte limit. "
        + not_yet_evaluated("after each materialization of input_shards"),
    )
    def shards_within_limits(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        manifest = _state(spec, context).manifest() or []
        over: list[dict[str, Any]] = [
            {"shard": s.key, "rows": s.rows, "bytes": s.bytes}
            for s in manifest
            if s.rows > spec.max_requests_per_batch or s.bytes > spec.max_batch_bytes
        ]
        return dg.AssetCheckResult(
            passed=not over, metadata={"shards": len(manifest), "over": str(over)}
        )

    return [every_row_once, same_rows, every_row_final, failed_rows, shards_within_limits]


def same_rows_check(
    spec: JobSpec, keys: set[str], merged_key: dg.AssetKey, table_key: dg.AssetKey | None
) -> dg.AssetChecksDefinition:
    """merged holds exactly the input table's rows: the same count, and each row's input
    columns equal to the input's row at the same place (compared by a digest per row)."""
    description = (
        "merged has exactly the input table's rows: the same count and, row by row in order, "
        "the same values in the input's columns (not only the job's own manifest). " + UNTIL_MERGED
    )
    if table_key is None:

        @dg.asset_check(
            asset=merged_key,
            name="same_rows_as_input",
            required_resource_keys=keys,
            description=description,
        )
        def same_rows_as_input_file(
            context: dg.AssetCheckExecutionContext, merged: pl.LazyFrame
        ) -> dg.AssetCheckResult:
            assert spec.source is not None
            s3 = context.resources.maple_storage.s3_settings()
            return same_rows_result(scan(spec.source, s3), merged)

        return same_rows_as_input_file

    @dg.asset_check(
        asset=merged_key,
        name="same_rows_as_input",
        additional_ins={"table": dg.AssetIn(key=table_key)},
        description=description,
    )
    def same_rows_as_input(merged: pl.LazyFrame, table: Any) -> dg.AssetCheckResult:
        if not isinstance(table, (pl.DataFrame, pl.LazyFrame)):
            table = pl.DataFrame(table)
        return same_rows_result(table.lazy(), merged)

    return same_rows_as_input


def same_rows_result(table: pl.LazyFrame, merged: pl.LazyFrame) -> dg.AssetCheckResult:
    columns = table.collect_schema().names()
    present = set(merged.collect_schema().names())  # once: a table may have 10,000 columns
    missing = [c for c in columns if c not in present]
    if missing:
        return dg.AssetCheckResult(passed=False, metadata={"missing_input_columns": str(missing)})
    compared = compare_rows(_row_digests(table, columns), _row_digests(merged, columns))
    metadata: dict[str, Any] = {"input_rows": compared.theirs, "rows": compared.ours}
    if compared.first_different is not None:
        metadata["first_different_row"] = compared.first_different
    return dg.AssetCheckResult(passed=compared.same, metadata=metadata)


@dataclasses.dataclass
class Compared:
    theirs: int = 0
    ours: int = 0
    first_different: int | None = None  # also the shorter side's length when one side ends first

    @property
    def same(self) -> bool:
        return self.first_different is None


def compare_rows(theirs: Iterator[np.ndarray], ours: Iterator[np.ndarray]) -> Compared:
    """Compare two streams of row digests in order (no empty batches), holding one batch of
    each at a time."""
    result = Compared()
    mine = yours = _NONE
    while True:
        if not len(mine):
            mine = next(theirs, _NONE)
            result.theirs += len(mine)
        if not len(yours):
            yours = next(ours, _NONE)
            result.ours += len(yours)
        if not len(mine) or not len(yours):
            break  # one side ended
        step = min(len(mine), len(yours))
        differs = np.flatnonzero(mine[:step] != yours[:step])
        if len(differs) and result.first_different is None:
            result.first_different = result.theirs - len(mine) + int(differs[0])
        mine, yours = mine[step:], yours[step:]
    result.theirs += sum(len(batch) for batch in theirs)
    result.ours += sum(len(batch) for batch in ours)
    if result.first_different is None and result.theirs != result.ours:
        result.first_different = min(result.theirs, result.ours)
    return result


def _row_digests(frame: pl.LazyFrame, columns: list[str]) -> Iterator[np.ndarray]:
    """A 64-bit digest per row of ``columns`` (as JSON, so nested values and types compare),
    ``DIGEST_ROWS`` rows at a time: a 10M-row table's digests and their encoding, collected at
    once, raised a job's peak memory by 460 MB. (Slices, not ``collect_batches``: the latter
    ran ahead of its reader and held 360 MB.)"""
    row = pl.struct([pl.col(c) for c in columns]).struct.json_encode().hash(seed=0)
    digests = frame.select(row.alias("digest"))
    offset = 0
    while True:
        batch = digests.slice(offset, DIGEST_ROWS).collect(engine="streaming")
        if not batch.height:
            return
        offset += batch.height
        yield batch["digest"].to_numpy()


def failed_rows_result(spec: JobSpec, merged: pl.LazyFrame) -> dg.AssetCheckResult:
    """Pass while the failed share is within ``max_failed_share`` (0: no failed row at all);
    beyond ``error_failed_share`` the failure is an ERROR, else a WARN."""
    classes = (
        merged.filter(pl.col("llm_status") == "failed")
        .group_by(pl.col("llm_failure_class").fill_null("unknown"))
        .agg(pl.len().alias("rows"))
        .sort(["rows", "llm_failure_class"], descending=[True, False])
        .collect()
    )
    rows = int(merged.select(pl.len()).collect().item())
    verdict = failed_verdict(spec, rows, dict(classes.iter_rows()))
    return dg.AssetCheckResult(**verdict)


def failed_verdict(spec: JobSpec, rows: int, by_class: dict[str, int]) -> dict[str, Any]:
    """The ``failed_rows`` verdict over ``rows`` rows of which ``by_class`` failed (rows per
    failure class): passed, Dagster's severity, a description naming the top classes and
    their counts, and the figures as metadata."""
    failed = sum(by_class.values())
    share = failed / rows if rows else 0.0
    passed = failed == 0 if spec.max_failed_share == 0 else share <= spec.max_failed_share
    ranked = sorted(by_class.items(), key=lambda item: (-item[1], item[0]))
    top = ", ".join(f"{c}: {n}" for c, n in ranked[:5])
    error = not passed and share > spec.error_failed_share
    said = (
        f"{failed:,} of {rows:,} rows failed ({share:.1%}; allowed {spec.max_failed_share:.1%}): "
        f"{top}"
        if failed
        else f"no row of {rows:,} failed"
    )
    return {
        "passed": passed,
        "severity": dg.AssetCheckSeverity.ERROR if error else dg.AssetCheckSeverity.WARN,
        "description": said,
        "metadata": {
            "rows": rows,
            "failed": failed,
            "rows_failed": failed,  # the materializations' key (docs/components.md)
            "failed_share": round(share, 6),
            "max_failed_share": spec.max_failed_share,
            "top_failure_classes": top or "none",
        },
    }


def shard_failed_rows_spec(
    spec: JobSpec, key: dg.AssetKey, pdef: dg.PartitionsDefinition
) -> dg.AssetCheckSpec:
    """The per-shard ``failed_rows`` check of ``raw_responses``: evaluated for each partition
    as it is collected, so a shard with failed rows is visibly not plain success."""
    return shard_check_spec(
        FAILED_ROWS,
        key,
        pdef,
        "This shard's share of failed rows within max_failed_share "
        f"({spec.max_failed_share:.1%}; WARN) and error_failed_share "
        f"({spec.error_failed_share:.1%}; ERROR); the result names the failure classes "
        "and their counts.",
    )


def shard_check_spec(
    name: str, key: dg.AssetKey, pdef: dg.PartitionsDefinition, says: str
) -> dg.AssetCheckSpec:
    """A check of ``raw_responses`` evaluated for each partition as it is collected."""
    with warnings.catch_warnings():  # a partitioned check is a preview in dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name,
            asset=key,
            partitions_def=pdef,
            description=f"{says} {not_yet_evaluated('as the shard is collected')}",
        )


def shard_failed_rows(
    spec: JobSpec,
    key: dg.AssetKey,
    shard: str,
    rows: int,
    by_class: dict[str, int],
    *,
    pending: int = 0,
    reused: bool = False,
) -> dg.AssetCheckEvaluation:
    """The per-shard ``failed_rows`` evaluation of partition ``shard`` of ``raw_responses``
    (``key``): ``rows`` rows, the failed ones per class, ``pending`` of them to be retried;
    ``reused``: every answer of the shard came from the response store."""
    verdict = failed_verdict(spec, rows, by_class)
    if pending:
        verdict["description"] += f" ({pending:,} to be retried)"
    if reused:
        verdict["description"] += " (every answer reused from the response store)"
    return dg.AssetCheckEvaluation(
        asset_key=key, check_name=FAILED_ROWS, partition=shard, **verdict
    )


def reused_shard_failed_rows(
    spec: JobSpec, key: dg.AssetKey, shard: ShardInfo, failures: pl.DataFrame
) -> dg.AssetCheckEvaluation:
    """The evaluation of a shard answered wholly from the response store (nothing sent): its
    rows' stored answers, the failed ones by class (``failures``: the version's filled rows
    whose stored outcome failed, `maple_engine.plan.versions.filled_failures`)."""
    mine = failures.filter(pl.col(ROW_ID).is_between(shard.first_row, shard.last_row))
    by_class = dict(mine.group_by("failure_class").len().iter_rows())
    return shard_failed_rows(spec, key, shard.key, shard.rows, by_class, reused=True)


def shard_checks(
    context: dg.AssetExecutionContext, evaluations: list[dg.AssetCheckEvaluation]
) -> Iterator[Any]:
    """The per-shard evaluations of a run (one, or a range of shards), each on its own
    partition, then each check's output once, when the run selected the check."""
    selected = context.selected_asset_check_keys
    chosen = [e for e in evaluations if e.asset_check_key in selected]
    yield from (on_latest(context.instance, e) for e in chosen)
    for name, spec in context.assets_def.check_specs_by_output_name.items():
        if spec.key in selected:  # none evaluated: every shard of the run superseded
            yield dg.Output(None, output_name=name)


def on_latest(
    instance: dg.DagsterInstance, evaluation: dg.AssetCheckEvaluation
) -> dg.AssetCheckEvaluation:
    """``evaluation`` pointed at its partition's latest materialization (logged before it):
    Dagster shows a partition's check state only while it judged the latest materialization,
    and reads one that points nowhere as Missing."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=evaluation.asset_key, asset_partitions=[evaluation.partition or ""]
        ),
        limit=1,
    ).records
    if not records:
        return evaluation
    target = AssetCheckEvaluationTargetMaterializationData(
        storage_id=records[0].storage_id, run_id=records[0].run_id, timestamp=records[0].timestamp
    )
    return dg.AssetCheckEvaluation(
        asset_key=evaluation.asset_key,
        check_name=evaluation.check_name,
        passed=evaluation.passed,
        metadata=evaluation.metadata,
        target_materialization_data=target,
        severity=evaluation.severity,
        description=evaluation.description,
        partition=evaluation.partition,
    )
