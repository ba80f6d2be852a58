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
from typing import Any

import numpy as np
import polars as pl

from maple_assets.api.driver import Ready, prepare
from maple_assets.api.options import EnrichOptions
from maple_assets.api.result import Result
from maple_engine.crashpoints import crash_point
from maple_engine.distill.classifier import Classifier, Vectors, classifier_version
from maple_engine.distill.output import distilled_output
from maple_engine.distill.plan import (
    Decision,
    decide,
    embedding_job,
    gate_line,
    sample_labels,
    vectors_of,
)
from maple_engine.distill.reports import DistillReport, write_report
from maple_engine.distill.sample import ROW_KEY, row_keys, sample_rows
from maple_engine.distill.train import train
from maple_engine.inputs.sources import scan
from maple_engine.label_field import LabelField, label_field
from maple_engine.ledger.costs import CostLedger
from maple_engine.merge.merge import write_merged
from maple_engine.settings import Settings
from maple_engine.spec import JobSpec, build_spec
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
        field = label_field(spec.response_schema)
        rows = scan(str(spec.source)).collect()
        rows = rows.with_columns(row_keys(rows, str(spec.prompt)))
        embed = embedding_spec(spec, storage.uri(paths.embeddings))
        embedded_run = self.drive(prepare(self._embedding_options(embed), self.emulator))
        if embedded_run.status == "stopped":  # budget, quota, cancel: nothing more is sent
            return embedded_run, _stopped(len(rows))
        crash_point("distill_embedded")
        vectors, present = vectors_of(storage.read_parquet(paths.embeddings, ["llm_embedding"]))
        keys = rows[ROW_KEY]
        embedded = keys.filter(pl.Series(present))
        chosen = embedded.gather(sample_rows(embedded, spec.distill_sample))
        sample = keys.is_in(chosen.implode()).to_numpy()
        answers, first = self.llm(rows.filter(pl.Series(sample | self.earlier_llm_rows(keys))))
        if first.status == "stopped":  # a rerun of the command goes on from here
            return first, _stopped(len(rows))
        taught = np.flatnonzero(sample)
        classifier = self.classifier(field, answers, keys.to_list(), vectors, taught)
        decision = decide(classifier, vectors, present, sample)
        crash_point("distill_trained")
        answers, second = self.llm(rows.filter(pl.Series(~decision.distilled)), "distill_unsure")
        version = classifier.version if classifier is not None else None
        table = distilled_output(rows, answers, field, decision, version)
        source = str(spec.source) if str(spec.source).endswith(".parquet") else None
        written = write_merged(iter([table]), str(spec.output), spec.output_format(), source)
        report = self.report(classifier, decision, answers, len(rows))
        write_report(storage, spec.name, report)
        return _whole(first, second, table, written.path), report

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

    def earlier_llm_rows(self, keys: pl.Series) -> np.ndarray:
        """The rows an earlier run gave the LLM job (kept, so its batches are never dropped)."""
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

    def classifier(
        self, field: LabelField, answers: pl.DataFrame, keys: list[str], vectors: Vectors,
        sample: np.ndarray,
    ) -> Classifier | None:  # fmt: skip
        """The classifier of the sample's labels: stored under its content address, else
        trained and stored (None: the LLM answered no sample row)."""
        spec, labelled = self.spec, sample_labels(answers, field.name)
        taught = [int(i) for i in sample if keys[i] in labelled]
        if not taught:
            return None
        pairs = sorted({(keys[i], labelled[keys[i]]) for i in taught}, key=str)
        model = spec.distill_embedding_model
        target = spec.distill_agreement
        version = classifier_version(model, spec.distill_dimensions, target, pairs)
        key = self.paths.classifier(version)
        if self.storage.exists(key):
            return Classifier.from_json(self.storage.read_bytes(key))
        labels = [labelled[keys[i]] for i in taught]
        classifier = train(version, model, vectors[taught], labels, spec.distill_agreement)
        self.storage.write_bytes(key, classifier.to_json())
        return classifier

    def spent(self, job: str) -> float:
        """What ``job`` has spent in all its runs (the cost ledger)."""
        settings = Settings.load(storage=self.opts.storage_root)
        with CostLedger(database_url=settings.cost_db, storage_root=settings.storage_root) as led:
            return sum(e.cost_usd for e in led.job_entries(job))

    def report(
        self, classifier: Classifier | None, decision: Decision, answers: pl.DataFrame, rows: int
    ) -> DistillReport:
        """What the run measured, and its cost (every run's, from the ledger) against sending
        every row to the LLM (at the LLM's mean cost per answered row)."""
        spec = self.spec
        embedded, llm = self.spent(embedding_job(spec.name)), self.spent(spec.name)
        answered = answers.filter(pl.col("llm_status") == "succeeded")
        per_row = float(answered["llm_cost_usd"].sum()) / max(1, answered.height)
        distilled = int(decision.distilled.sum())
        found = classifier or _NONE
        refused = None if found.distills else gate_line(found, spec.distill_agreement)
        return DistillReport(
            rows=rows, distilled=distilled, llm_rows=rows - distilled,
            sample=found.trained_on + found.held_out, held_out=found.held_out,
            agreement=found.agreement, accepted_agreement=found.accepted_agreement,
            classifier=found.version, refused=refused, embedding_cost_usd=embedded,
            llm_cost_usd=llm, all_llm_cost_usd=per_row * rows,
        )  # fmt: skip


def _stopped(rows: int) -> DistillReport:
    """The report of a run that stopped before the classifier answered any row."""
    refused = "distill: the job stopped before the classifier was trained or used"
    return DistillReport(rows, 0, rows, 0, 0, 0.0, 0.0, "", refused, 0.0, 0.0, 0.0)


#: what a job whose LLM answered no sample row reports
_NONE = Classifier("", "", (), (), (), 0, 0, 0.0, None, 0.0, 0.0)


def embedding_spec(spec: JobSpec, output: str) -> JobSpec:
    """The embedding job of every row's prompt, on the job's provider and account."""
    fields: dict[str, Any] = {
        "name": embedding_job(spec.name), "kind": "embedding", "text": spec.prompt,
        "model": spec.distill_embedding_model, "dimensions": spec.distill_dimensions,
        "provider": spec.distill_provider or spec.provider, "team": spec.team,
        "source": spec.source, "output": output,
        "allow_untracked_cost": spec.allow_untracked_cost, "headers": spec.headers,
        "extra_body": spec.extra_body, "max_requests_per_batch": spec.max_requests_per_batch,
        "max_batch_bytes": spec.max_batch_bytes, "deadline_s": spec.deadline_s,
        "budget_usd": spec.budget_usd,
    }  # fmt: skip
    return build_spec(**fields)


_ADDED = (
    "input_tokens", "output_tokens", "cost_usd", "realtime_cost_usd", "saved_usd",
    "cached_tokens", "cache_write_tokens", "cache_saved_usd", "uncached_cost_usd",
    "reasoning_tokens",
)  # fmt: skip


def _whole(first: Result, second: Result, table: pl.DataFrame, output: str) -> Result:
    """The LLM job's two runs as one over the whole output's rows: what both sent and spent
    (the second reuses what the first sent)."""
    failed = int((table["llm_status"] == "failed").sum())
    added = {name: getattr(first, name) + getattr(second, name) for name in _ADDED}
    return dataclasses.replace(
        second, rows=table.height, succeeded=table.height - failed, failed=failed,
        sent=first.sent + second.sent, reused=max(0, second.reused - first.sent),
        output=output, **added,
    )  # fmt: skip
