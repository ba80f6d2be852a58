"""Which rows the LLM answers in a distilled job, and what the job measured: the pure part of
``--distill``, between reading the embeddings and the LLM's answers and writing the output
(its files under the storage root: `maple_engine.storage.layout.DistillPaths`)."""

import dataclasses
from typing import Any

import numpy as np
import polars as pl

from maple_engine.distill.classifier import Classifier, Vectors
from maple_engine.distill.embeddings import Embeddings, matrix
from maple_engine.distill.gate import MIN_COVERAGE
from maple_engine.distill.sample import ROW_KEY
from maple_engine.spec import JobSpec, build_spec


def embedding_job(job: str) -> str:
    """The name of a distilled job's embedding job."""
    return f"{job}-embeddings"


def embedding_jobs(distilled: list[str]) -> dict[str, str]:
    """Each distilled job's embedding job's name, mapped to the distilled job's."""
    return {embedding_job(job): job for job in distilled}


def embedding_spec(spec: JobSpec, output: str | None) -> JobSpec:
    """The embedding job of every row's prompt, on the job's provider (or
    ``--distill-provider``) and account (``output``: None for the job's default)."""
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


def vectors_of(embeddings: pl.DataFrame) -> tuple[Vectors, np.ndarray]:
    """The embedding output's vectors (zeros where it failed) and which rows have one."""
    column = embeddings["llm_embedding"]
    return matrix(column), column.is_not_null().to_numpy()


def sample_labels(answers: pl.DataFrame, field: str) -> dict[str, Any]:
    """The LLM's label of each answered row key (succeeded rows of the LLM job's output)."""
    ok = answers.filter(pl.col("llm_status") == "succeeded")
    labels = ok.select(ROW_KEY, pl.col("llm_parsed").struct.field(field).alias("label"))
    labels = labels.filter(pl.col("label").is_not_null()).unique(ROW_KEY, keep="first")
    return dict(zip(labels[ROW_KEY].to_list(), labels["label"].to_list(), strict=True))


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the classifier answers: each row's label and confidence, and the rows it answers."""

    labels: list[Any] | None
    confidence: np.ndarray | None
    distilled: np.ndarray  # rows answered by the classifier


def decide(
    classifier: Classifier | None,
    vectors: "Vectors | Embeddings",
    present: np.ndarray,
    in_sample: np.ndarray,
) -> Decision:
    """The rows the classifier answers: those with a vector, outside the sample, whose
    confidence is at or over the threshold (none when the gate refused); ``vectors``: every
    row's, or the embedding output scored a slice at a time."""
    none = np.zeros(len(present), dtype=bool)
    if classifier is None or not classifier.weights:
        return Decision(None, None, none)
    if isinstance(vectors, Embeddings):
        labels, confidence = vectors.score(classifier)
    else:
        labels, confidence = classifier.score(vectors)
    confidence = np.where(present, confidence, np.nan)
    if classifier.threshold is None:
        return Decision(labels, confidence, none)
    sure = present & ~in_sample & (np.nan_to_num(confidence) >= classifier.threshold)
    return Decision(labels, confidence, sure)


def gate_line(classifier: Classifier, target: float) -> str:
    """The one line that says why the job is not distilled."""
    if not classifier.weights:
        return (
            f"distill: not distilling: the LLM gave the {classifier.trained_on:,} sample rows "
            "fewer than two labels, nothing to learn; every row goes to the LLM"
        )
    return (
        f"distill: not distilling: the classifier agrees with the LLM on "
        f"{classifier.agreement:.1%} of {classifier.held_out:,} held-out sample rows and no "
        f"confidence threshold reaches {target:.1%} on at least {MIN_COVERAGE:.0%} of them; "
        "every row goes to the LLM (try a larger --distill-sample, a lower "
        "--distill-agreement, or another --distill-embedding-model)"
    )
