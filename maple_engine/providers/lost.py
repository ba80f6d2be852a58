"""A batch the job created that the provider no longer knows (404).

A 404 on one batch is not proof: it is treated as lost only when the provider's batch list
confirms it is gone. A lost batch ends with status ``lost`` and no result lines, so every row of
the attempt comes out unrun (``expired``, never billed) and only those rows are sent again in a
new batch. Cancelling a lost batch succeeds: there is nothing left to cancel.
"""

from collections.abc import Callable, Iterable
from typing import Any

from maple_engine.errors import ProviderError

LOST = "lost"


def fetch_or_lost(
    fetch: Callable[[str], dict[str, Any]],
    listing: Callable[[], Iterable[dict[str, Any]]],
    batch_id: str,
) -> dict[str, Any]:
    """The batch from ``fetch``; on a 404, from the listing; absent there too, a lost batch."""
    try:
        return fetch(batch_id)
    except ProviderError as exc:
        if exc.status != 404:
            raise
    for batch in listing():
        if batch.get("id") == batch_id:
            return batch
    return {"id": batch_id, "status": LOST, "processing_status": LOST}  # OpenAI, Anthropic


def ignore_missing(cancel: Callable[[], Any]) -> None:
    """Run a cancel call; a 404 (the batch is gone) counts as cancelled."""
    try:
        cancel()
    except ProviderError as exc:
        if exc.status != 404:
            raise
