"""OpenAI batches: validation, the lazily computed status lifecycle, and line processing.

A batch's status is a function of the wall clock: with ``B = batch_seconds`` it is
``validating`` until ``created + 0.1 B``, ``in_progress`` until ``0.9 B``, ``finalizing`` until
``B``, then ``completed`` (or ``expired`` for batches drawn by the ``expired`` fault). The input
file is validated the first time the batch is observed past ``validating`` and processed into
output and error files once, when it is first observed past its end (or by the finisher thread).
"""

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from emulator.batch_lines import LineRunner, validate_lines
from emulator.state import State, StoredFile

WINDOW_SECONDS = 24 * 3600
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass
class Final:
    """How a batch ended; fixed once computed."""

    status: str
    at: float
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    usage: dict[str, Any] | None = None


@dataclass(eq=False)
class OpenAIBatch:
    """One batch and the facts its status is computed from."""

    id: str
    endpoint: str
    input_file: StoredFile
    completion_window: str
    metadata: dict[str, str] | None
    created: float
    seconds: float
    expire: bool
    cancel_at: float | None = None
    errors: list[dict[str, Any]] | None = None
    total: int = 0
    model: str | None = None
    final: Final | None = None
    parsed: list[dict[str, Any]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def in_progress_at(self) -> float:
        return self.created + 0.1 * self.seconds

    @property
    def finalizing_at(self) -> float:
        return self.created + 0.9 * self.seconds

    @property
    def end(self) -> float:
        return self.created + self.seconds

    def done_by(self, moment: float) -> int:
        """How many requests had run by ``moment`` (linear over the in-progress window)."""
        if moment < self.in_progress_at or self.errors is None:
            return 0
        span = self.finalizing_at - self.in_progress_at
        fraction = 1.0 if span <= 0 else min(1.0, (moment - self.in_progress_at) / span)
        return int(fraction * self.total)


def advance(state: State, batch: OpenAIBatch, now: float) -> None:
    """Do whatever validation or processing ``now`` requires (at most once each)."""
    with batch.lock:
        if batch.final is not None:
            return
        if batch.cancel_at is not None:
            settle = batch.cancel_at + 0.1 * batch.seconds
            if now >= settle:
                done = batch.done_by(batch.cancel_at)
                _finish(state, batch, "cancelled", at=settle, done=done, unrun="batch_cancelled")
            return
        if now < batch.in_progress_at:
            return
        if batch.errors is None:
            _validate(state, batch, keep=now >= batch.end)
        if batch.errors:
            batch.final = Final("failed", batch.in_progress_at)
            state.stats.add("batches_failed")
            return
        if now >= batch.end:
            status, done = (
                ("expired", batch.total // 2) if batch.expire else ("completed", batch.total)
            )
            _finish(state, batch, status, at=batch.end, done=done, unrun="batch_expired")


def _validate(state: State, batch: OpenAIBatch, keep: bool) -> None:
    config = state.config
    result = validate_lines(
        batch.input_file.path, batch.endpoint, config.openai_max_requests, config.openai_max_bytes
    )
    batch.errors, batch.total, batch.model = result.errors, result.total, result.model
    batch.parsed = result.lines if keep and not result.errors else None


def _finish(
    state: State, batch: OpenAIBatch, status: str, *, at: float, done: int, unrun: str
) -> None:
    lines = batch.parsed
    batch.parsed = None
    runner = LineRunner(state, batch.id, batch.endpoint)
    result = runner.run(batch.input_file.path if lines is None else lines, done, unrun)
    output = _store(state, batch, "output", result.output_path)
    errors = _store(state, batch, "error", result.error_path)
    batch.total = result.total
    batch.final = Final(
        status, at, result.total, result.succeeded, result.failed, output, errors, result.usage()
    )
    state.stats.merge(Counter({f"batches_{status}": 1}))


def _store(state: State, batch: OpenAIBatch, kind: str, path: Any) -> str | None:
    if path is None:
        return None
    stored = state.add_file(f"batch_{batch.id}_{kind}.jsonl", "batch_output", path)
    return stored.id


def status_of(batch: OpenAIBatch, now: float) -> str:
    """The status shown at ``now`` (call ``advance`` first)."""
    if batch.final is not None:
        return batch.final.status
    if batch.cancel_at is not None:
        return "cancelling"
    if now < batch.in_progress_at or batch.errors is None:
        return "validating"
    return "in_progress" if now < batch.finalizing_at else "finalizing"


def batch_json(batch: OpenAIBatch, now: float) -> dict[str, Any]:
    """The OpenAI ``batch`` object as seen at ``now``."""
    status = status_of(batch, now)
    final = batch.final
    stamps = _timestamps(batch, status)
    if final is not None:
        counts = {"total": final.total, "completed": final.completed, "failed": final.failed}
    elif status == "validating" or batch.errors is None:
        counts = {"total": 0, "completed": 0, "failed": 0}
    else:
        moment = batch.cancel_at if batch.cancel_at is not None else now
        counts = {"total": batch.total, "completed": batch.done_by(moment), "failed": 0}
    errors = {"object": "list", "data": batch.errors} if batch.errors else None
    result: dict[str, Any] = {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "model": batch.model,
        "errors": errors,
        "input_file_id": batch.input_file.id,
        "completion_window": batch.completion_window,
        "status": status,
        "output_file_id": final.output_file_id if final else None,
        "error_file_id": final.error_file_id if final else None,
        **stamps,
        "request_counts": counts,
        "metadata": batch.metadata,
    }
    if final is not None and final.usage is not None:
        result["usage"] = final.usage
    return result


def _timestamps(batch: OpenAIBatch, status: str) -> dict[str, int | None]:
    final = batch.final
    end = int(final.at) if final else None
    started = status not in ("validating", "failed") and batch.errors is not None
    finalized = status in ("finalizing", "completed", "expired")
    return {
        "created_at": int(batch.created),
        "in_progress_at": int(batch.in_progress_at) if started else None,
        "expires_at": int(batch.created) + WINDOW_SECONDS,
        "finalizing_at": int(batch.finalizing_at) if finalized else None,
        "completed_at": end if status == "completed" else None,
        "failed_at": end if status == "failed" else None,
        "expired_at": end if status == "expired" else None,
        "cancelling_at": int(batch.cancel_at) if batch.cancel_at is not None else None,
        "cancelled_at": end if status == "cancelled" else None,
    }


def observe(state: State, batch: OpenAIBatch) -> dict[str, Any]:
    """Advance ``batch`` to now and return its JSON."""
    now = time.time()
    advance(state, batch, now)
    return batch_json(batch, now)
