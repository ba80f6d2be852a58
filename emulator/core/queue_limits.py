"""The providers' queue limits: OpenAI's enqueued-token limit per model and Anthropic's limit on
requests waiting in the Message Batches processing queue.

OpenAI (``--enqueued-token-limit N``): a batch's prompt tokens (as ``emulator.core.tokens`` counts
them) are enqueued from the moment it passes validation until it ends. A batch whose tokens
would push its model's enqueued total past N fails validation with ``token_limit_exceeded``,
the way OpenAI's does. The check is made at the batch's own validation time against the batches
of its model that were enqueued then, so the outcome does not depend on when a client polls.

Anthropic (``--anthropic-queue-limit N``): creating a batch whose requests would push the
requests of unfinished batches past N is refused with a 429 ``rate_limit_error``.
"""

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.core.state import State
    from emulator.openai.records import OpenAIBatch

ORGANIZATION = "org-emulator"
_LOCK = threading.RLock()


def _ended_at(batch: "OpenAIBatch") -> float:
    if batch.final is not None:
        return batch.final.at
    if batch.cancel_at is not None:
        return batch.cancel_at + 0.1 * batch.seconds
    return batch.end


def enqueued_at(state: "State", model: str, moment: float, exclude: "OpenAIBatch") -> int:
    """Prompt tokens of ``model``'s batches enqueued at ``moment`` (validated, not ended)."""
    total = 0
    for other in list(state.openai_batches.values()):
        if other is exclude or other.model != model or other.enqueued_tokens <= 0:
            continue
        if other.in_progress_at <= moment < _ended_at(other):
            total += other.enqueued_tokens
    return total


def admit_openai(
    state: "State",
    batch: "OpenAIBatch",
    tokens: int,
    advance: "Callable[[OpenAIBatch], None]",
) -> dict[str, Any] | None:
    """Enqueue a validated batch's ``tokens``, or return the ``token_limit_exceeded`` error.

    Batches created earlier are validated first (``advance``), so they are counted however
    the polls arrive; locks are always taken from later batches to earlier ones."""
    limit = state.config.enqueued_token_limit
    if limit is None or batch.model is None:
        return None
    earlier = [
        other
        for other in list(state.openai_batches.values())
        if other.created < batch.created and other.run is None and other.final is None
    ]
    for other in earlier:
        advance(other)
    with _LOCK:
        used = enqueued_at(state, batch.model, batch.in_progress_at, batch)
        if used + tokens > limit:
            state.stats.add("batches_failed_token_limit")
            message = (
                f"Enqueued token limit reached for {batch.model} in organization {ORGANIZATION}. "
                f"Limit: {limit:,} enqueued tokens. Please try submitting your batch again later."
            )
            return {"code": "token_limit_exceeded", "message": message, "param": None, "line": None}
        batch.enqueued_tokens = tokens
        state.stats.maximum("max_enqueued_tokens", used + tokens)
    return None


def anthropic_refusal(state: "State", requests: int, now: float) -> str | None:
    """Why a new Message Batch of ``requests`` requests is refused (the queue is full), or None.

    The caller holds ``state.lock`` and registers the batch under it when this returns None."""
    limit = state.config.anthropic_queue_limit
    if limit is None:
        return None
    queued = sum(
        b.total
        for b in state.anthropic_batches.values()
        if b.ended is None and now < b.created + b.seconds
    )
    if queued + requests <= limit:
        state.stats.maximum("max_anthropic_queued_requests", queued + requests)
        return None
    state.stats.add("anthropic_queue_429")
    return (
        f"Number of requests in the Message Batches processing queue would exceed the limit: "
        f"{queued:,} queued + {requests:,} in this batch > limit {limit:,} requests. "
        "Please try again once earlier batches have ended."
    )
