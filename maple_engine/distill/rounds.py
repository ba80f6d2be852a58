"""Where a distilled job stands, from its input, its embeddings and the LLM's answers so far:
which rows its LLM job answers next. Two rounds, each a fixed point of what is stored:

- ``sample``: some sample row has no answer of the LLM job yet; the LLM job answers the sample
  (and every row it answered before, so a batch in flight is never dropped);
- ``unsure``: the LLM job has answered every sample row; the classifier of the sample's labels
  (stored under its content address, else trained and stored) scores every row, and the LLM job
  answers the sample and every row the classifier is unsure of.

``maple enrich --distill`` (``maple_assets.api.distill``) and the asset graph's ``distill_rows``
and ``distilled`` (``maple_assets.graph.distill``) both ask this module, so both choose the same
sample, classifier and unsure rows."""

import dataclasses
from typing import Any, Literal

import numpy as np
import polars as pl

from maple_engine.distill.classifier import Classifier, classifier_version
from maple_engine.distill.embeddings import Embeddings
from maple_engine.distill.plan import Decision, decide, sample_labels
from maple_engine.distill.sample import ROW_KEY, row_keys, sample_rows
from maple_engine.distill.train import train
from maple_engine.label_field import LabelField, label_field
from maple_engine.spec import JobSpec
from maple_engine.storage.layout import DistillPaths
from maple_engine.storage.storage import Storage

Stage = Literal["sample", "unsure"]


def keyed(rows: pl.DataFrame, prompt: str) -> pl.DataFrame:
    """The input's rows with each row's key (``ROW_KEY``: its rendered prompt's SHA-256)."""
    return rows.with_columns(row_keys(rows, prompt))


@dataclasses.dataclass(frozen=True)
class Round:
    """What the LLM job answers next, and what the classifier decided (``unsure`` only)."""

    stage: Stage
    llm_rows: np.ndarray  # which input rows the LLM job answers in this round
    sample: np.ndarray  # which input rows are in the sample
    classifier: Classifier | None
    decision: Decision

    def rows(self, rows: pl.DataFrame) -> pl.DataFrame:
        """The LLM job's input: the rows it answers, with their keys."""
        return rows.filter(pl.Series(self.llm_rows))


def sample_of(keys: pl.Series, present: np.ndarray, size: int) -> np.ndarray:
    """Which rows are in the sample: among the rows with a vector, the ``size`` distinct
    prompts whose keys sort first."""
    embedded = keys.filter(pl.Series(present))
    chosen = embedded.gather(sample_rows(embedded, size))
    return keys.is_in(chosen.implode()).to_numpy()


def next_round(
    spec: JobSpec,
    storage: Storage,
    rows: pl.DataFrame,
    embeddings: Embeddings,
    answers: pl.DataFrame | None,
) -> Round:
    """The round of ``spec``'s job over ``rows`` (keyed), its ``embeddings`` (the embedding
    job's output, in row order) and the LLM job's last output ``answers`` (None: none yet)."""
    keys = rows[ROW_KEY]
    sample = sample_of(keys, embeddings.present, spec.distill_sample)
    given = np.zeros(len(keys), dtype=bool)  # rows the LLM job answered last
    if answers is not None:
        given = keys.is_in(answers[ROW_KEY].implode()).to_numpy()
    if answers is None or not given[sample].all():
        nothing = Decision(None, None, np.zeros(len(keys), dtype=bool))
        return Round("sample", sample | given, sample, None, nothing)
    return unsure_round(spec, storage, rows, embeddings, sample=sample, answers=answers)


def unsure_round(
    spec: JobSpec, storage: Storage, rows: pl.DataFrame, embeddings: Embeddings,
    *, sample: np.ndarray, answers: pl.DataFrame,
) -> Round:  # fmt: skip
    """The second round: the classifier of the LLM's ``answers`` to the ``sample`` scores every
    row with a vector; the LLM job answers every row it does not answer."""
    keys = rows[ROW_KEY].to_list()
    field = label_field(spec.response_schema)
    taught = np.flatnonzero(sample)
    found = classifier_for(spec, storage, field, answers, keys, vectors=embeddings, sample=taught)
    decision = decide(found, embeddings, embeddings.present, sample)
    return Round("unsure", ~decision.distilled, sample, found, decision)


def classifier_for(
    spec: JobSpec, storage: Storage, field: LabelField, answers: pl.DataFrame, keys: list[str],
    *, vectors: Embeddings, sample: np.ndarray,
) -> Classifier | None:  # fmt: skip
    """The classifier of the sample's labels: stored under its content address, else trained
    and stored (None: the LLM answered no sample row)."""
    labelled = sample_labels(answers, field.name)
    taught = [int(i) for i in sample if keys[i] in labelled]
    if not taught:
        return None
    pairs = sorted({(keys[i], labelled[keys[i]]) for i in taught}, key=str)
    model = spec.distill_embedding_model
    version = classifier_version(model, spec.distill_dimensions, spec.distill_agreement, pairs)
    key = DistillPaths(spec.name).classifier(version)
    if storage.exists(key):
        return Classifier.from_json(storage.read_bytes(key))
    labels: list[Any] = [labelled[keys[i]] for i in taught]
    taught_vectors = vectors.take(np.asarray(taught))
    classifier = train(version, model, taught_vectors, labels, spec.distill_agreement)
    storage.write_bytes(key, classifier.to_json())
    return classifier
