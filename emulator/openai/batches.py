"""OpenAI batches: validation, the lazily computed status lifecycle, and line processing.

A batch's status is a function of the wall clock: with ``B = batch_seconds`` it is
``validating`` until ``created + 0.1 B``, ``in_progress`` until ``0.9 B``, ``finalizing`` until
``B``, then ``completed`` (or ``expired`` for batches drawn by the ``expired`` fault). One pass
validates the input file and writes the output and error files, the first time the batch is
observed past ``validating`` (the finisher thread does it then, too); the batch's counters are
committed when it ends.
"""

import time
from pathlib import Path
from typing import Any

import orjson

from emulator.azure.routes import engine_endpoint
from emulator.core.prompt_cache import CacheUse
from emulator.core.queue_limits import admit_openai
from emulator.core.state import State
from emulator.openai.batch_lines import BatchPass, PassResult, unrun_line
from emulator.openai.batch_results import commit, cut_files
from emulator.openai.records import Final, OpenAIBatch

WINDOW_SECONDS = 24 * 3600
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


def advance(state: State, batch: OpenAIBatch, now: float) -> None:
    """Do whatever ``now`` requires: run the single pass once, end the batch once (and push
    its event, with ``--webhook-url``: an OpenAI batch's, not a Mistral job's)."""
    if batch.final is not None:
        return
    _advance(state, batch, now)
    final = batch.final
    if final is not None and state.webhooks is not None and batch.job_model is None:
        with batch.lock:
            told, batch.told = batch.told, True
        if not told:
            state.webhooks.batch_ended(batch.id, final.status, final.at)


def _advance(state: State, batch: OpenAIBatch, now: float) -> None:
    with batch.lock:
        if batch.final is not None:
            return
        if batch.cancel_at is not None and batch.cancel_at < batch.in_progress_at:
            if now >= batch.cancel_at + 0.1 * batch.seconds:
                _cancel_unvalidated(state, batch)
            return
        if now < batch.in_progress_at:
            return
        if batch.run is None:
            _run(state, batch)
        if batch.errors:
            batch.final = Final("failed", batch.in_progress_at)
            state.stats.add("batches_failed")
        elif batch.cancel_at is not None:
            settle = batch.cancel_at + 0.1 * batch.seconds
            if now >= settle:
                _finish(state, batch, "cancelled", at=settle, done=batch.done_by(batch.cancel_at))
        elif now >= batch.end:
            status = "expired" if batch.expire else "completed"
            _finish(state, batch, status, at=batch.end, done=batch.total)


def _run(state: State, batch: OpenAIBatch) -> None:
    endpoint = engine_endpoint(batch.endpoint)
    runner = BatchPass(
        state, batch.id, endpoint, batch.org, batch.endpoint, job_model=batch.job_model
    )
    result = runner.run(batch.input_file.path, expire=batch.expire, created=int(batch.created))
    batch.run = result
    batch.errors, batch.total, batch.model = result.errors, result.total, result.model
    if not result.errors:
        refused = admit_openai(
            state, batch, result.prompt_tokens, lambda other: advance(state, other, time.time())
        )
        if refused is not None:
            _discard(result)
            batch.errors = [refused]


def _discard(result: PassResult) -> None:
    for path in (result.output_path, result.error_path):
        if path is not None:
            path.unlink(missing_ok=True)
    result.ok.clear()
    result.failed.clear()
    result.output_path = result.error_path = None


def _cancel_unvalidated(state: State, batch: OpenAIBatch) -> None:
    """A batch cancelled while validating: every parseable line comes back ``batch_cancelled``."""
    prefix = batch.id.removeprefix("batch_")
    path = state.new_path()
    count = 0
    with batch.input_file.path.open("rb") as source, path.open("wb") as target:
        for raw in source:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                target.write(
                    unrun_line(prefix, count, line["custom_id"], "batch_cancelled") + b"\n"
                )
                count += 1
    batch.total = count
    at = batch.cancel_at + 0.1 * batch.seconds if batch.cancel_at is not None else time.time()
    errors = _store(state, batch, "error", path if count else None)
    batch.final = Final("cancelled", at, count, 0, count, None, errors, _usage(0, 0, 0))
    state.stats.add("batches_cancelled")


def _finish(state: State, batch: OpenAIBatch, status: str, *, at: float, done: int) -> None:
    result = batch.run
    if result is None:
        return
    if done < result.total - result.unrun:
        cut_files(state, result, batch.id.removeprefix("batch_"), done)
    succeeded, _, (tokens_in, tokens_out, cached) = commit(state, result, done)
    output = _store(state, batch, "output", result.output_path)
    errors = _store(state, batch, "error", result.error_path)
    failed = result.total - succeeded
    usage = _usage(tokens_in, tokens_out, cached)
    if succeeded:
        state.billing.charge(
            "openai",
            batch.api_key,
            batch.model or "",
            (tokens_in, tokens_out),
            at=at,
            batch_id=batch.id,
            cache=CacheUse(read=cached),
            project=batch.project,
        )
    batch.final = Final(status, at, result.total, succeeded, failed, output, errors, usage)
    batch.run = PassResult(total=result.total)
    state.stats.add(f"batches_{status}")


def _usage(tokens_in: int, tokens_out: int, cached: int) -> dict[str, Any]:
    return {
        "input_tokens": tokens_in,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens_in + tokens_out,
    }


def _store(state: State, batch: OpenAIBatch, kind: str, path: Path | None) -> str | None:
    if path is None:
        return None
    name = f"batch_{batch.id}_{kind}.jsonl"
    stored = state.add_file(name, "batch_output", path, project=batch.project)
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
