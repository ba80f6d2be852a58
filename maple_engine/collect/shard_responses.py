"""A shard's responses over every collected attempt: what ``merged``, ``maple status`` and the
summaries read of a shard."""

import polars as pl

from maple_engine.collect.responses import NOT_SENT, stored_responses, unsent_responses, with_final
from maple_engine.failures import FailureClass
from maple_engine.model import CUSTOM_ID, ROW_ID, StopKind
from maple_engine.state import JobState
from maple_engine.storage.response_store import ResponseStore, collection


def shard_responses(state: JobState, shard: str) -> pl.DataFrame:
    """The shard's merged responses over every collected attempt: the final outcomes from the
    response store, the rows still pending from the last collection's ``results-n``."""
    summary = state.summary(shard)
    attempts = summary.attempt if summary else 0
    if attempts == 0:  # never collected: nothing to send, or the job stopped before sending
        rows = state.plan(shard, 1)
        if rows is None:
            rows = state.shard_frame(shard, columns=[ROW_ID, CUSTOM_ID])
        record = state.stop_record() or {}
        quota = state.stop_kind() is StopKind.QUOTA
        cls = FailureClass.INSUFFICIENT_QUOTA.value if quota else NOT_SENT
        return unsent_responses(rows, record.get("reason", "not sent yet"), cls)
    return with_final(final_before(state, shard, attempts + 1), state.results(shard, attempts))


def final_before(state: JobState, shard: str, attempt: int) -> pl.DataFrame | None:
    """The rows the shard's attempts before ``attempt`` made final, from the response store."""
    if attempt <= 1:
        return None
    names = [collection(shard, n) for n in range(1, attempt)]
    return stored_responses(ResponseStore(state.storage, state.job).collected(names))
