"""``--distill``: a one-field classification answered mostly by a classifier trained on the
LLM's labels of a sample, through the ordinary machinery in three steps, each resumable:

1. the embedding job ``NAME-embeddings`` embeds every row's prompt (batch-priced, booked);
2. the LLM job ``NAME`` answers the sample (and the rows an earlier run sent it), the
   classifier is trained on the sample's vectors and labels, measured on held-out sample rows
   and stored under its content address (``maple_engine.distill``);
3. the LLM job ``NAME`` runs again over the sample and every row the classifier is unsure of
   (its answers so far come from the response store), and the output is written: each row's
   LLM answer where it has one, else the classifier's label.

A kill at any point, then the same command, pays for nothing twice: each job resumes, and the
LLM job's input only grows within a run (step 2 of a rerun keeps the rows step 3 sent)."""

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import polars as pl

from maple_assets.api.driver import Ready, prepare
from maple_assets.api.options import EnrichOptions
from maple_assets.api.result import Result
from maple_engine.crashpoints import crash_point
from maple_engine.distill.embeddings import Embeddings
from maple_engine.distill.output import Written, distilled_table
from maple_engine.distill.plan import embedding_job, embedding_spec
from maple_engine.distill.reports import DistillReport, write_report
from maple_engine.distill.rounds import keyed, sample_of, unsure_round
from maple_engine.distill.sample import ROW_KEY
from maple_engine.inputs.sources import scan
from maple_engine.ledger.costs import CostLedger
from maple_engine.merge.merge import write_merged
from maple_engine.settings import Settings
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import DistillPaths
from maple_engine.storage.storage import Storage

Drive = Callable[[Ready], Result]


def run_distilled(
    opts: EnrichOptions, emulator: str | None, drive: Drive
) -> tuple[Result, DistillReport]:
    """Run a distilled job to its end: its embedding job, its LLM job on the sample, the
    classifier, its LLM job on the rest, and the output."""
    return DistilledRun(opts, emulator, drive).run()


def drive_job(ready: Ready, emulator: str | None, drive: Drive) -> Result:
    """Run a checked job with ``drive``: a distilled one through its steps, its ``Result``
    carrying the distillation's figures (``distill``), any other job as it is."""
    if not ready.spec.distill:
        return drive(ready)
    result, report = run_distilled(ready.opts, emulator, drive)
    return dataclasses.replace(result, distill=report.metadata())


@dataclasses.dataclass
class DistilledRun:
    """One run of a distilled job, its steps through ``drive`` (``maple enrich``'s driver)."""

    opts: EnrichOptions
    emulator: str | None
    drive: Drive

    @property
    def spec(self) -> JobSpec:
        return self.opts.spec

    @functools.cached_property
    def storage(self) -> Storage:
        return Storage(self.opts.storage_root)

    @functools.cached_property
    def paths(self) -> DistillPaths:
        return DistillPaths(self.spec.name)

    def run(self) -> tuple[Result, DistillReport]:
        spec, storage, paths = self.spec, self.storage, self.paths
        rows = keyed(scan(str(spec.source)).collect(), str(spec.prompt))
        embed = embedding_spec(spec, storage.uri(paths.embeddings))
        embedded_run = self.drive(prepare(self._embedding_options(embed), self.emulator))
        if embedded_run.status == "stopped":  # budget, quota, cancel: nothing more is sent
            return embedded_run, _stopped(len(rows))
        crash_point("distill_embedded")
        embedded = Embeddings(storage.scan_parquet(paths.embeddings))
        sample = sample_of(rows[ROW_KEY], embedded.present, spec.distill_sample)
        answers, first = self.llm(rows.filter(pl.Series(sample | self.earlier_llm_rows(rows))))
        if first.status == "stopped":  # a rerun of the command goes on from here
            return first, _stopped(len(rows))
        unsure = unsure_round(spec, storage, rows, embedded, sample=sample, answers=answers)
        crash_point("distill_trained")
        answers, second = self.llm(unsure.rows(rows), "distill_unsure")
        frames, tally, report = distilled_table(spec, rows, answers, unsure, self.spent)
        source = str(spec.source) if str(spec.source).endswith(".parquet") else None
        written = write_merged(frames, str(spec.output), spec.output_format(), source)
        write_report(storage, spec.name, report)
        return _whole(first, second, tally, written.path), report

    def _with(self, spec: JobSpec) -> EnrichOptions:
        return self.opts.model_copy(update={"spec": spec})

    def _embedding_options(self, embed: JobSpec) -> EnrichOptions:
        """The embedding job's command options: ``--distill-base-url``, or the job's own
        provider settings when it embeds through the job's provider."""
        opts = self.opts
        if embed.provider == self.spec.provider:
            base_url = opts.distill_base_url or opts.base_url
            return opts.model_copy(update={"spec": embed, "base_url": base_url})
        update = {"spec": embed, "base_url": opts.distill_base_url, "completion_window": None}
        return opts.model_copy(update=update)

    def earlier_llm_rows(self, rows: pl.DataFrame) -> np.ndarray:
        """The rows an earlier run gave the LLM job (kept, so its batches are never dropped)."""
        keys = rows[ROW_KEY]
        if not self.storage.exists(self.paths.llm_input):
            return np.zeros(len(keys), dtype=bool)
        sent = self.storage.read_parquet(self.paths.llm_input, [ROW_KEY])[ROW_KEY]
        return keys.is_in(sent.implode()).to_numpy()

    def llm(self, rows: pl.DataFrame, point: str = "") -> tuple[pl.DataFrame, Result]:
        """Run the LLM job ``NAME`` over ``rows``; its output and result (``point``: the crash
        point between writing its input and running it)."""
        storage, paths = self.storage, self.paths
        storage.write_parquet(paths.llm_input, rows)
        if point:
            crash_point(point)
        budget = self.spec.budget_usd
        if budget is not None:  # one budget for the whole job: what the embeddings left
            budget = max(0.0, budget - self.spent(embedding_job(self.spec.name)))
        spec = self.spec.model_copy(
            update={"distill": False, "source": storage.uri(paths.llm_input),
                    "output": storage.uri(paths.llm_output), "budget_usd": budget}
        )  # fmt: skip
        result = self.drive(prepare(self._with(spec), self.emulator))
        return storage.read_parquet(paths.llm_output), result

    def spent(self, job: str) -> float:
        """What ``job`` has spent in all its runs (the cost ledger)."""
        settings = Settings.load(storage=self.opts.storage_root)
        with CostLedger(database_url=settings.cost_db, storage_root=settings.storage_root) as led:
            return sum(e.cost_usd for e in led.job_entries(job))


def _stopped(rows: int) -> DistillReport:
    """The report of a run that stopped before the classifier answered any row."""
    refused = "distill: the job stopped before the classifier was trained or used"
    return DistillReport(rows, 0, rows, 0, 0, 0.0, 0.0, "", refused, 0.0, 0.0, 0.0)


_ADDED = (
    "input_tokens", "output_tokens", "cost_usd", "realtime_cost_usd", "saved_usd",
    "cached_tokens", "cache_write_tokens", "cache_saved_usd", "uncached_cost_usd",
    "reasoning_tokens",
)  # fmt: skip


def _whole(first: Result, second: Result, table: Written, output: str) -> Result:
    """The LLM job's two runs as one over the whole output's rows: what both sent and spent
    (the second reuses what the first sent)."""
    failed = table.failed
    added = {name: getattr(first, name) + getattr(second, name) for name in _ADDED}
    return dataclasses.replace(
        second, rows=table.rows, succeeded=table.rows - failed, failed=failed,
        sent=first.sent + second.sent, reused=max(0, second.reused - first.sent),
        output=output, **added,
    )  # fmt: skip
