"""What stops a real-time attempt at a reply that can never fit its job
(`maple_engine.providers.reply_fit`), on result rows as the wires parse them."""

from typing import Any

from maple_engine.providers.reply_fit import FitWatch, ReplyFit, is_vector
from maple_engine.providers.vectors import embedding_row

SCHEMA = {
    "type": "object",
    "properties": {"brand": {"type": "string"}},
    "required": ["brand"],
    "additionalProperties": False,
}


def text_row(custom_id: str, text: str) -> dict[str, Any]:
    return {"custom_id": custom_id, "status": "succeeded", "billed": True, "response": text}


def test_two_rows_not_matching_the_schema_before_any_did_stop_the_job() -> None:
    watch = FitWatch(ReplyFit(schema=SCHEMA))
    assert watch.stop_reason([text_row("a", "Acme makes it.")]) is None
    reason = watch.stop_reason([text_row("b", "A fine thing.")])
    assert reason is not None and "2 different rows' replies did not match" in reason
    assert "the reply is not JSON" in reason


def test_once_a_reply_matched_one_that_does_not_is_its_row_s_failure() -> None:
    watch = FitWatch(ReplyFit(schema=SCHEMA))
    assert watch.stop_reason([text_row("a", "nope")]) is None
    assert watch.stop_reason([text_row("b", '{"brand": "Acme"}')]) is None
    assert watch.stop_reason([text_row(c, "prose") for c in "cdef"]) is None


def test_failed_rows_are_not_replies_to_judge() -> None:
    watch = FitWatch(ReplyFit(schema=SCHEMA))
    failed = {"custom_id": "a", "status": "failed", "response": None}
    assert watch.stop_reason([failed, failed]) is None
    assert watch.strikes == []


def test_text_where_an_embedding_was_asked_stops_at_the_first() -> None:
    watch = FitWatch(ReplyFit(embedding=True))
    assert watch.stop_reason([embedding_row("a", [0.5, 0.25], 3)]) is None
    reason = watch.stop_reason([text_row("b", "Hello! How can I help you today?")])
    assert reason is not None and "where an embedding was asked" in reason
    assert "'Hello! How can I help you today?'" in reason


def test_a_vector_of_another_length_stops_at_the_first() -> None:
    watch = FitWatch(ReplyFit(embedding=True, dimensions=2))
    assert watch.stop_reason([embedding_row("a", [0.5, 0.25], 3)]) is None
    reason = watch.stop_reason([embedding_row("b", [0.5, 0.25, 0.125], 3)])
    assert reason is not None and "3-value vectors where --dimensions asked for 2" in reason


def test_what_a_vector_is() -> None:
    assert is_vector(embedding_row("a", [1.0, 2.0, 3.0], 1)["response"])
    assert not is_vector("Hello")
    assert not is_vector("SGVsbG8=")  # base64, but 5 bytes: no float32 vector
    assert not is_vector("")
    assert not is_vector(None)
