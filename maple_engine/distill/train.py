"""Fitting the classifier on the sample's embeddings and the LLM's labels, and measuring it on
the held-out part of the sample (split stratified by label, so rare labels are measured too)."""

from typing import Any

import numpy as np

from maple_engine.distill.classifier import Classifier, Vectors
from maple_engine.distill.gate import choose_threshold

#: share of the sample held out to measure agreement and choose the threshold
HELD_OUT = 0.3
_SEED = 0  # the split and the fit are the same on every rerun


def train(
    version: str,
    embedding_model: str,
    vectors: Vectors,
    labels: list[Any],
    target: float,
) -> Classifier:
    """A classifier fitted on part of the sample, its threshold chosen on the rest."""
    # scikit-learn (and scipy) take about a second to import: only a distilled job loads them
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    y = np.array([_key(label) for label in labels], dtype=object)
    classes = sorted(set(y.tolist()), key=str)
    if len(classes) < 2:  # one label throughout: nothing to learn, the gate refuses
        return _refused(version, embedding_model, classes, len(labels))
    counts = {c: int((y == c).sum()) for c in classes}
    stratify = y if min(counts.values()) >= 2 else None
    fit_x, test_x, fit_y, test_y = train_test_split(
        vectors, y, test_size=HELD_OUT, random_state=_SEED, stratify=stratify
    )
    if len(set(fit_y.tolist())) < 2:
        return _refused(version, embedding_model, classes, len(labels))
    model = LogisticRegression(max_iter=1000, random_state=_SEED).fit(fit_x, fit_y.astype(str))
    fitted = tuple(_label(c, labels) for c in model.classes_)
    candidate = Classifier(
        version, embedding_model, fitted,
        tuple(tuple(float(w) for w in row) for row in model.coef_),
        tuple(float(b) for b in model.intercept_),
        len(fit_y), len(test_y), 0.0, None, 0.0, 0.0,
    )  # fmt: skip
    predicted, confidence = candidate.score(test_x)
    agrees = np.array([_key(p) == t for p, t in zip(predicted, test_y, strict=True)])
    chosen = choose_threshold(confidence, agrees, target)
    return Classifier(
        **{
            **candidate.__dict__,
            "agreement": float(agrees.mean()),
            "threshold": None if chosen is None else chosen.confidence,
            "coverage": 0.0 if chosen is None else chosen.coverage,
            "accepted_agreement": 0.0 if chosen is None else chosen.agreement,
        }
    )


def _key(label: Any) -> str:
    """A label as the classifier's class name (enum values and booleans alike)."""
    return str(label)


def _label(key: str, labels: list[Any]) -> Any:
    return next(label for label in labels if _key(label) == key)


def _refused(version: str, model: str, classes: list[str], rows: int) -> Classifier:
    return Classifier(version, model, tuple(classes), (), (), rows, 0, 0.0, None, 0.0, 0.0)
