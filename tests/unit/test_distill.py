"""The distilled lane's pure parts: the label field a schema asks for, the threshold and the
gate, training and scoring, the classifier's stored form and the output's columns."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from maple_engine.distill import embeddings
from maple_engine.distill.classifier import Classifier, classifier_version
from maple_engine.distill.gate import choose_threshold
from maple_engine.distill.output import distilled_output
from maple_engine.distill.plan import Decision, decide, vectors_of
from maple_engine.distill.sample import ROW_KEY, row_keys, sample_rows
from maple_engine.distill.train import train
from maple_engine.errors import ConfigError
from maple_engine.label_field import LabelField, label_field
from maple_engine.spec import build_spec


def _schema(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def test_the_label_field_is_one_enum_or_one_boolean() -> None:
    assert label_field(_schema(aisle={"type": "string", "enum": ["a", "b"]})) == LabelField(
        "aisle", ("a", "b")
    )
    assert label_field(_schema(is_organic={"type": "boolean"})) == LabelField("is_organic", None)
    for schema in (None, _schema(a={"type": "string"}), _schema(a={"type": "boolean"}, b={})):
        with pytest.raises(ValueError, match="--distill needs a --response-schema of one enum"):
            label_field(schema)


def test_a_distilled_spec_without_a_label_field_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        build_spec(
            name="j", prompt="{t}", model="m", source="x.csv", distill=True,
            response_schema=_schema(a={"type": "string"}, b={"type": "string"}),
        )  # fmt: skip
    assert "\n" not in str(refused.value)
    assert "the schema has 2 fields" in str(refused.value)


def test_the_threshold_is_the_lowest_that_keeps_the_agreement() -> None:
    confidence = np.array([0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
    agrees = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0, 0], dtype=bool)
    chosen = choose_threshold(confidence, agrees, target=0.85)
    assert chosen is not None
    assert (chosen.confidence, chosen.coverage) == (0.4, 0.8)
    assert chosen.agreement == pytest.approx(7 / 8)
    assert choose_threshold(confidence, agrees, target=1.0, min_coverage=0.7) is None


def test_a_learnable_rule_distills_and_noise_is_gated() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(600, 8))
    rule = np.where(vectors[:, 0] > 0, "yes", "no").tolist()
    learnt = train("v1", "emb", vectors, rule, target=0.95)
    assert learnt.distills and learnt.agreement > 0.9 and learnt.held_out == 180
    labels, confidence = learnt.score(vectors)
    assert np.mean(np.array(labels) == np.array(rule)) > 0.95
    assert confidence.min() >= 0.5
    noise = rng.choice(["a", "b", "c"], size=600).tolist()
    gated = train("v2", "emb", vectors, noise, target=0.95)
    assert not gated.distills and gated.agreement < 0.6


def test_the_classifier_round_trips_and_is_addressed_by_its_sample() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(200, 4))
    labels = [bool(v) for v in vectors[:, 1] > 0]
    classifier = train("v", "emb", vectors, labels, target=0.9)
    again = Classifier.from_json(classifier.to_json())
    assert again == classifier and again.score(vectors)[0] == classifier.score(vectors)[0]
    assert set(again.classes) == {True, False}
    one = classifier_version("emb", 256, 0.95, [("k1", "a"), ("k2", "b")])
    assert one == classifier_version("emb", 256, 0.95, [("k2", "b"), ("k1", "a")])
    assert one != classifier_version("emb", 256, 0.95, [("k1", "a"), ("k2", "a")])
    assert one != classifier_version("other", 256, 0.95, [("k1", "a"), ("k2", "b")])
    assert one != classifier_version("emb", 256, 0.9, [("k1", "a"), ("k2", "b")])


def test_the_sample_is_chosen_by_the_prompts_content() -> None:
    frame = pl.DataFrame({"t": [f"item {i}" for i in range(50)] + ["item 3"]})
    keys = row_keys(frame, "Item: {t}")
    chosen = sample_rows(keys, 10)
    assert (3 in chosen) == (50 in chosen)  # the same prompt: in the sample together
    moved = row_keys(frame.reverse(), "Item: {t}")
    assert set(keys.gather(chosen)) == set(moved.gather(sample_rows(moved, 10)))


def test_distilled_rows_are_answered_by_the_classifier_the_rest_by_the_llm() -> None:
    parsed = pl.Struct({"aisle": pl.String})
    rows = pl.DataFrame({"title": ["x", "y", "z"], ROW_KEY: ["k0", "k1", "k2"]})
    answers = pl.DataFrame(
        {
            ROW_KEY: ["k0"], "llm_response": ['{"aisle":"dairy"}'],
            "llm_parsed": pl.Series([{"aisle": "dairy"}], dtype=parsed),
            "llm_status": ["succeeded"], "llm_failure_class": pl.Series([None], dtype=pl.String),
            "llm_attempts": [1], "llm_cost_usd": [0.01], "llm_model": ["gpt"],
            "llm_reused": [False],
        }
    )  # fmt: skip
    decision = Decision(["bakery", "produce", "bakery"], np.array([0.4, 0.99, np.nan]),
                        np.array([False, True, False]))  # fmt: skip
    table = distilled_output(rows, answers, LabelField("aisle", None), decision, "logreg-1")
    assert table.columns[:2] == ["title", "llm_response"]
    assert table["llm_source"].to_list() == ["llm", "distilled", "llm"]
    assert table["llm_parsed"].struct.field("aisle").to_list() == ["dairy", "produce", None]
    assert table["llm_model"].to_list() == ["gpt", "logreg-1", None]
    assert table["llm_status"].to_list() == ["succeeded", "succeeded", "failed"]
    assert table["llm_failure_class"].to_list() == [None, None, "not_sent"]
    assert table["llm_attempts"].to_list() == [1, 0, None]
    assert table["llm_confidence"].to_list() == [0.4, 0.99, None]


def test_the_embedding_outputs_vectors_are_read_with_their_gaps() -> None:
    column = pl.Series(
        "llm_embedding", [[1.0, 2.0], None, [3.0, 4.0]], dtype=pl.Array(pl.Float32, 2)
    )
    vectors, present = vectors_of(pl.DataFrame([column]))
    assert vectors.tolist() == [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]
    assert present.tolist() == [True, False, True]


def test_rows_without_a_vector_or_in_the_sample_are_never_distilled() -> None:
    sure = Classifier("v", "e", ("a", "b"), ((1.0, 0.0),), (0.0,), 1, 1, 1.0, 0.5, 1.0, 1.0)
    vectors = np.array([[9.0, 0.0], [9.0, 0.0], [9.0, 0.0], [0.0, 0.0]])
    present = np.array([True, False, True, True])
    sample = np.array([False, False, True, False])
    decision = decide(sure, vectors, present, sample)
    assert decision.distilled.tolist() == [True, False, False, True]


def test_the_vectors_are_read_and_scored_a_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(0)
    rows = [None if i % 7 == 3 else rng.normal(size=4).tolist() for i in range(50)]
    column = pl.Series("llm_embedding", rows, dtype=pl.Array(pl.Float32, 4))
    pl.DataFrame([column]).write_parquet(tmp_path / "e.parquet", row_group_size=8)
    whole, present = vectors_of(pl.DataFrame([column]))
    monkeypatch.setattr(embeddings, "SLICE_ROWS", 6)  # nine slices, the last one short
    sliced = embeddings.Embeddings(pl.scan_parquet(tmp_path / "e.parquet"))
    assert sliced.present.tolist() == present.tolist()
    assert np.array_equal(sliced.take(np.array([40, 2, 17])), whole[[40, 2, 17]])
    three = Classifier(
        "v", "e", ("a", "b", "c"), ((1.0, 0, 0, 0), (0, 1.0, 0, 0), (0, 0, 1.0, 0)),
        (0.0, 0.1, -0.1), 1, 1, 1.0, 0.5, 1.0, 1.0,
    )  # fmt: skip
    labels, confidence = sliced.score(three)
    expected_labels, expected = three.score(whole)
    assert labels == expected_labels and np.allclose(confidence, expected)
