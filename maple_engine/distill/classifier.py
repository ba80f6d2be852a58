"""The distilled classifier: a logistic regression over embeddings, kept as plain numbers (its
classes, weights and threshold) so that scoring needs numpy only and the stored record is JSON,
content-addressed by what it was trained on."""

import dataclasses
import hashlib
from typing import Any

import numpy as np
import orjson

Vectors = np.ndarray[Any, np.dtype[np.float64]]


@dataclasses.dataclass(frozen=True)
class Classifier:
    """A trained classifier, its threshold and what the held-out rows measured."""

    version: str  # content address: the embedding model, its length and the sample's labels
    embedding_model: str
    classes: tuple[Any, ...]
    weights: tuple[tuple[float, ...], ...]  # one row per class (one row: a binary classifier)
    intercepts: tuple[float, ...]
    trained_on: int  # sample rows it was fitted on
    held_out: int  # sample rows it was measured on
    agreement: float  # share of held-out rows on which it agrees with the LLM
    threshold: float | None  # None: the gate refused, every row goes to the LLM
    coverage: float  # share of held-out rows at or over the threshold
    accepted_agreement: float  # agreement of those rows

    def score(self, vectors: Vectors) -> tuple[list[Any], np.ndarray]:
        """Each row's label and its confidence (the probability of that label)."""
        logits = vectors @ np.asarray(self.weights).T + np.asarray(self.intercepts)
        if len(self.weights) == 1:  # binary: the second class's probability is a sigmoid
            positive = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            probs = np.column_stack([1.0 - positive, positive])
        else:
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            probs = shifted / shifted.sum(axis=1, keepdims=True)
        best = probs.argmax(axis=1)
        return [self.classes[i] for i in best], probs[np.arange(len(best)), best]

    @property
    def distills(self) -> bool:
        """Whether the gate let it answer rows."""
        return self.threshold is not None

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> "Classifier":
        fields = orjson.loads(data)
        fields["classes"] = tuple(fields["classes"])
        fields["weights"] = tuple(tuple(row) for row in fields["weights"])
        fields["intercepts"] = tuple(fields["intercepts"])
        return cls(**fields)


def classifier_version(
    embedding_model: str, dimensions: int | None, target: float, sample: list[tuple[str, Any]]
) -> str:
    """The content address of a classifier trained on ``sample`` (row key, label) pairs, its
    threshold chosen for the agreement ``target``."""
    fields = {"model": embedding_model, "dimensions": dimensions, "target": target}
    payload = orjson.dumps(fields | {"sample": sorted(sample, key=str)})
    return "logreg-" + hashlib.sha256(payload).hexdigest()[:16]
