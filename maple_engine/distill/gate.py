"""The confidence threshold, chosen on held-out sample rows, and the gate that refuses to
distill when no threshold reaches the agreement asked for at a useful coverage."""

import dataclasses

import numpy as np

#: the least share of held-out rows the classifier must answer for distilling to be worth it
MIN_COVERAGE = 0.2


@dataclasses.dataclass(frozen=True)
class Threshold:
    """A threshold and what it gives on the held-out rows."""

    confidence: float  # rows whose confidence is at least this are answered by the classifier
    coverage: float  # share of held-out rows at or over it
    agreement: float  # agreement with the LLM of those rows


def choose_threshold(
    confidence: np.ndarray, agrees: np.ndarray, target: float, min_coverage: float = MIN_COVERAGE
) -> Threshold | None:
    """The lowest confidence at which the held-out rows at or over it agree with the LLM on at
    least ``target`` of them, covering at least ``min_coverage``; None: none does (the gate)."""
    if len(confidence) == 0:
        return None
    order = np.argsort(-confidence, kind="stable")
    ranked, hits = confidence[order], np.cumsum(agrees[order])
    best = None
    for end in range(len(ranked), 0, -1):
        if end < len(ranked) and ranked[end] == ranked[end - 1]:
            continue  # a threshold takes every row of its confidence
        if hits[end - 1] / end >= target:
            best = end
            break
    if best is None or best / len(ranked) < min_coverage:
        return None
    return Threshold(float(ranked[best - 1]), best / len(ranked), float(hits[best - 1] / best))
