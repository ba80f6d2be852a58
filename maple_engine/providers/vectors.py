"""Result rows of embedding replies, whatever the provider: the vector travels in ``response``
as base64 little-endian float32 (what the merge decodes into ``llm_embedding``)."""

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np


def vector_base64(vector: Any) -> str:
    """A vector as base64 little-endian float32: as given when base64 already, else packed."""
    if isinstance(vector, str):
        return vector
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def base64_length(values: int) -> int:
    """The base64 characters of a vector of ``values`` float32 values, padding included: one
    length per vector length, so vectors are told apart by length without decoding them."""
    return 4 * -(-values * 4 // 3)


def vector_values(encoded: str) -> int:
    """The values of a base64 float32 vector, counted from its length (not decoded)."""
    padding = len(encoded) - len(encoded.rstrip("="))
    return (len(encoded) * 3 // 4 - padding) // 4


def misfit(rows: Sequence[dict[str, Any]], length: int) -> int | None:
    """The length of the first succeeded vector among ``rows`` that is not ``length`` long."""
    expected = base64_length(length)
    for row in rows:
        vector = row.get("response")
        if row.get("status") != "succeeded" or not isinstance(vector, str):
            continue
        if len(vector) != expected:
            return vector_values(vector)
    return None


def misfit_reason(values: int, length: int) -> str:
    """Why a reply of ``values`` values cannot fit a job asking ``--dimensions length``."""
    return (
        f"the provider answered {values}-value vectors where --dimensions asked for {length}: "
        "it (or a gateway before it) does not shorten vectors. No such vector is kept: drop "
        "--dimensions (the model's own length) or send to a server that takes it, then rerun "
        "the same command"
    )


def embedding_row(custom_id: Any, vector: Any, tokens: int | None) -> dict[str, Any]:
    """A succeeded, billed row of one text's vector and its input tokens (None: the reply
    reported none; the collection estimates them)."""
    return {
        "custom_id": custom_id,
        "status": "succeeded",
        "billed": True,
        "input_tokens": tokens,
        "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": 0,
        "response": vector_base64(vector),
    }


def group_rows(
    custom_ids: Sequence[str], vectors: Sequence[Any], total: int | None
) -> list[dict[str, Any]]:
    """One row per text of a request that embedded several, in order.

    The reply's usage counts the whole request's tokens (no per-text figure): they are split
    evenly over its rows, the remainder on the first ones, so that the rows' tokens (and costs)
    add up to what was billed."""
    if len(vectors) != len(custom_ids):
        raise KeyError(f"{len(vectors)} vectors for {len(custom_ids)} texts")
    if total is None:  # no usage in the reply: each row's tokens are estimated from its text
        return [embedding_row(c, v, None) for c, v in zip(custom_ids, vectors, strict=True)]
    share, extra = divmod(total, len(custom_ids))
    return [
        embedding_row(custom_id, vector, share + (1 if index < extra else 0))
        for index, (custom_id, vector) in enumerate(zip(custom_ids, vectors, strict=True))
    ]
