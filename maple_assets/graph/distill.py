"""The asset graph of a distilled job (``enrichment(distill=True)``): its embedding job's
graph, its LLM job's graph, and two assets of its own between and after them:

    NAME-embeddings/input_shards -> ... -> NAME-embeddings/merged
        -> NAME/distill_rows -> NAME/input_shards -> ... -> NAME/merged -> NAME/distilled

``distill_rows`` is the LLM job's input: the rows it answers next (``maple_engine.distill.
rounds``). Its first materialization gives the sample; once the LLM job has merged the sample's
answers, the next trains (or loads) the classifier and gives the sample and every row the
classifier is unsure of. ``distilled`` writes the job's output from both jobs' outputs and the
classifier, with the distillation's figures as its metadata."""

import dataclasses
from collections.abc import Callable
from typing import Any

import dagster as dg
import polars as pl

from maple_assets.binding import COSTS_KEY, IO_MANAGER_KEY, STORAGE_KEY, job_for
from maple_assets.graph.distill_sensor import DISTILLED, ROWS, unsure_answered
from maple_assets.graph.names import JobKeys, dagster_name
from maple_assets.graph.tags import tag_run
from maple_assets.graph.waiting import wait_until
from maple_engine.crashpoints import crash_point
from maple_engine.distill.embeddings import Embeddings
from maple_engine.distill.output import distilled_table
from maple_engine.distill.reports import write_report
from maple_engine.distill.rounds import Round, keyed, next_round
from maple_engine.distill.sample import ROW_KEY
from maple_engine.inputs.sources import scan, scan_output
from maple_engine.ledger.costs import CostLedger
from maple_engine.merge.merge import OutputTable, write_merged
from maple_engine.policy import RetryPolicy
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import DistillPaths
from maple_engine.storage.storage import Storage
from resources.dagster_private import BACKFILL_ID_TAG


@dataclasses.dataclass(frozen=True)
class DistillJobs:
    """The distilled job's two jobs, each with its retry policy: the embedding job
    ``NAME-embeddings`` and the LLM job ``NAME`` (its input the ``distill_rows`` asset)."""

    job: JobSpec  # the distilled job as declared
    embed: JobSpec
    embed_policy: RetryPolicy
    llm: JobSpec
    llm_policy: RetryPolicy


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a distill asset reads: the input rows (keyed), the embedding job's vectors and the
    LLM job's last output (None before its first merge)."""

    rows: pl.DataFrame
    embeddings: Embeddings
    answers: pl.DataFrame | None

    def round(self, spec: JobSpec, storage: Storage) -> Round:
        return next_round(spec, storage, self.rows, self.embeddings, self.answers)


def read_inputs(context: dg.AssetExecutionContext, jobs: DistillJobs) -> Inputs:
    resources = context.resources
    s3 = getattr(resources, STORAGE_KEY).s3_settings()
    rows = keyed(scan(str(jobs.job.source), s3).collect(), str(jobs.job.prompt))
    embedded = job_for(jobs.embed, jobs.embed_policy, resources).state.merged_record()
    if embedded is None:
        raise dg.Failure(f"{jobs.embed.name} has not merged: materialize it first")
    embeddings = Embeddings(scan_output(embedded["path"], s3))
    answered = job_for(jobs.llm, jobs.llm_policy, resources).state.merged_record()
    answers = scan_output(answered["path"], s3).collect() if answered is not None else None
    return Inputs(rows, embeddings, answers)


def _asset(
    name: str, asset: str, after: list[dg.AssetKey], *, keys: set[str], group: str, about: str
) -> Callable[..., dg.AssetsDefinition]:
    """The decorator of one of a distilled job's own assets (unpartitioned, its value a pointer
    to a file the IO manager hands downstream assets as a lazy scan)."""
    return dg.asset(
        key=JobKeys(name)(asset),
        group_name=group,
        deps=after,
        required_resource_keys=keys,
        io_manager_key=IO_MANAGER_KEY,
        description=about,
    )


def distill_rows_asset(jobs: DistillJobs, keys: set[str], group: str) -> dg.AssetsDefinition:
    name = jobs.job.name
    about = (
        f"The rows the LLM job {name} answers next: the sample, then (once it has answered "
        "the sample) the sample and every row the classifier is unsure of."
    )

    @_asset(name, ROWS, [JobKeys(jobs.embed.name)("merged")], keys=keys, group=group, about=about)
    def distill_rows(context: dg.AssetExecutionContext) -> dg.Output[OutputTable]:
        job = job_for(jobs.llm, jobs.llm_policy, context.resources)
        tag_run(context, jobs.llm, job.state)
        inputs = read_inputs(context, jobs)
        storage = job.state.storage
        chosen = inputs.round(jobs.job, storage)
        if chosen.stage == "unsure":
            crash_point("distill_trained")
        sent = chosen.rows(inputs.rows)
        paths = DistillPaths(name)
        storage.write_parquet(paths.llm_input, sent)
        found = chosen.classifier
        metadata: dict[str, Any] = {
            "stage": chosen.stage,
            "rows": inputs.rows.height,
            "sample": int(chosen.sample.sum()),
            "llm_rows": sent.height,
            "distilled": int(chosen.decision.distilled.sum()),
            "classifier": found.version if found is not None else "",
        }
        table = OutputTable(storage.uri(paths.llm_input), "parquet", sent.height)
        return dg.Output(table, metadata=metadata)

    return distill_rows


def distilled_asset(
    jobs: DistillJobs, keys: set[str], group: str, interval_s: float
) -> dg.AssetsDefinition:
    spec, name = jobs.job, jobs.job.name
    about = (
        f"The input table, unchanged and in order, each row answered by the LLM job {name} "
        "or by the classifier (llm_source, llm_confidence)."
    )

    @_asset(
        name, DISTILLED, [JobKeys(name)("merged"), JobKeys(name)(ROWS)],
        keys=keys, group=group, about=about,
    )  # fmt: skip
    def distilled(context: dg.AssetExecutionContext) -> dg.Output[OutputTable]:
        if BACKFILL_ID_TAG in context.run.tags:  # "Materialize all": wait for the sensors
            _wait_for_unsure(context, name, interval_s)
        job = job_for(jobs.llm, jobs.llm_policy, context.resources)
        tag_run(context, jobs.llm, job.state)
        inputs, storage = read_inputs(context, jobs), job.state.storage
        last = inputs.round(spec, storage)
        answers = inputs.answers
        missing = last.rows(inputs.rows).height - _answered(last, inputs)
        if last.stage != "unsure" or answers is None or missing:
            raise dg.Failure(
                f"the LLM job {name} has not answered the rows {ROWS} gives it yet: "
                f"materialize {name}/{ROWS} and the LLM job's assets, then this one"
            )
        ledger: CostLedger = getattr(context.resources, COSTS_KEY)
        frames, _, report = distilled_table(spec, inputs.rows, answers, last, _spent(ledger))
        output = spec.output or storage.uri(DistillPaths(name).output(spec.output_format()))
        source = str(spec.source) if str(spec.source).endswith(".parquet") else None
        s3 = getattr(context.resources, STORAGE_KEY).s3_settings()
        written = write_merged(frames, output, spec.output_format(), source, s3)
        write_report(storage, name, report)
        return dg.Output(written, metadata={"path": written.path, **report.metadata()})

    return distilled


def _wait_for_unsure(context: dg.AssetExecutionContext, name: str, interval_s: float) -> None:
    """In a backfill ("Materialize all"), ``distilled`` waits while the job's sensors bring
    the next round (``NAME_distill_sensor``) and the LLM job's answers to it (its sensor)."""
    rows, merged = JobKeys(name)(ROWS), JobKeys(name)("merged")
    wait_until(
        context,
        lambda: unsure_answered(context.instance, rows, merged),
        lambda: (
            f"waiting for {dagster_name(name)}_distill_sensor and {dagster_name(name)}_sensor "
            f"to bring the LLM job {name}'s answers to the unsure rows (they must be running)"
        ),
        interval_s,
    )


def _answered(last: Round, inputs: Inputs) -> int:
    """How many of the rows the LLM job answers in ``last`` its output holds."""
    if inputs.answers is None:
        return 0
    keys = inputs.answers[ROW_KEY].implode()
    return int(last.rows(inputs.rows)[ROW_KEY].is_in(keys).sum())


def _spent(ledger: CostLedger) -> Callable[[str], float]:
    """What a job has spent in all its runs (the cost ledger)."""
    return lambda job: sum(e.cost_usd for e in ledger.job_entries(job))
