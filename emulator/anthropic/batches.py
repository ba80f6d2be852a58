"""Anthropic message batches: create-time validation, lazy lifecycle, and the results JSONL.

With ``B = batch_seconds`` a batch is ``in_progress`` until ``created + B`` and then ``ended``.
A cancelled batch is ``canceling`` for ``0.1 B``, then ends with the requests that had not run
by the cancel (progress is linear over ``B``) as ``canceled``. Batches drawn by the ``expired``
fault end at ``B`` with half of their requests ``expired``. A batch that ran every request
loses or repeats answered lines as ``--drop-lines`` and ``--duplicate-lines`` say
(``emulator.core.line_fates``).
"""

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from emulator.anthropic.engine import DEFAULT_VERSION, check_params
from emulator.core.faults import billing_key, bytes_key, canonical
from emulator.core.line_fates import LineFates
from emulator.core.prompt_cache import anthropic_usage
from emulator.core.ratelimit import rfc3339
from emulator.core.state import State

WINDOW_SECONDS = 24 * 3600
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class Ended:
    """How an Anthropic batch ended."""

    at: float
    counts: dict[str, int]
    results_path: Path


@dataclass(eq=False)
class AnthropicBatch:
    """One message batch."""

    id: str
    created: float
    seconds: float
    expire: bool
    requests: list[dict[str, Any]] | None
    total: int
    api_key: str = ""  # the key that created it (billed to its organisation)
    cancel_at: float | None = None
    ended: Ended | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    org: str = ""  # the API key that created it: whose prompt cache its requests use

    def done_by(self, moment: float) -> int:
        """Requests finished by ``moment`` (linear over the batch's duration)."""
        if self.seconds <= 0:
            return self.total
        return int(min(1.0, max(0.0, (moment - self.created) / self.seconds)) * self.total)


def check_requests(  # noqa: PLR0911  (one exit per rule)
    payload: Any, max_requests: int, version: str = DEFAULT_VERSION
) -> str | None:
    """Why a create body is invalid under API ``version`` (the message of a 400
    ``invalid_request_error``), or None."""
    if not isinstance(payload, dict) or not isinstance(payload.get("requests"), list):
        return "requests: Field required"
    requests = payload["requests"]
    if not requests:
        return "requests: List should have at least 1 item after validation, not 0"
    if len(requests) > max_requests:
        count = len(requests)
        return (
            f"requests: List should have at most {max_requests} items after validation, not {count}"
        )
    seen: set[str] = set()
    for index, item in enumerate(requests):
        if not isinstance(item, dict):
            return f"requests.{index}: Input should be an object"
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
            return (
                f"requests.{index}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )
        if custom_id in seen:
            return f"requests.{index}.custom_id: Duplicate custom_id '{custom_id}' in batch"
        seen.add(custom_id)
        problem = check_params(item.get("params"), version)
        if problem is not None:
            return f"requests.{index}.params.{problem}"
    return None


def advance(state: State, batch: AnthropicBatch, now: float) -> None:
    """Run the batch's requests once ``now`` is past its end (or its cancel has settled)."""
    with batch.lock:
        if batch.ended is not None:
            return
        if batch.cancel_at is not None:
            settle = batch.cancel_at + 0.1 * batch.seconds
            if now >= settle:
                _finish(state, batch, settle, batch.done_by(batch.cancel_at), "canceled")
            return
        end = batch.created + batch.seconds
        if now >= end:
            done = batch.total // 2 if batch.expire else batch.total
            _finish(state, batch, end, done, "expired")


def _finish(state: State, batch: AnthropicBatch, at: float, done: int, unrun: str) -> None:
    requests, batch.requests = batch.requests or [], None
    engine = state.anthropic
    counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    stats: Counter[str] = Counter()
    billed: list[int] = []
    path = state.new_path()
    config = state.config
    drop = config.drop_lines if done == len(requests) else 0.0  # a batch that ran every request
    fates = LineFates(config.seed, batch.id, drop, config.duplicate_lines)
    with path.open("wb") as handle:
        for index, item in enumerate(requests):
            custom_id, params = item["custom_id"], item["params"]
            copies = 1
            if index >= done:
                result: dict[str, Any] = {"type": unrun}
                counts[unrun] += 1
            else:
                body = canonical(params)
                outcome = engine.run(params, bytes_key(body), service_tier="batch")
                if outcome.fault is not None:
                    stats[f"fault_{outcome.fault}"] += 1
                copies = fates.copies() if outcome.status == 200 else 1
                if copies == 0:  # lost: counted succeeded, not billed, no line
                    counts["succeeded"] += 1
                    stats["lines_dropped"] += 1
                    continue
                stats["lines_duplicated"] += copies == 2
                if outcome.status == 200:
                    use = state.prompt_cache.anthropic(batch.org, params)
                    anthropic_usage(outcome.body, use)
                    state.stats.cached(use)
                    result = {"type": "succeeded", "message": outcome.body}
                    billed.append(billing_key("anthropic", custom_id, body))
                    stats["file_parts"] += outcome.file_parts
                    tokens = (outcome.prompt_tokens, outcome.completion_tokens)
                    model = str(params.get("model", ""))
                    state.billing.charge(
                        "anthropic",
                        batch.api_key,
                        model,
                        tokens,
                        at=at,
                        batch_id=batch.id,
                        cache=use,
                    )
                else:
                    result = {"type": "errored", "error": outcome.body}
                counts[result["type"]] += 1
            handle.write(
                (orjson.dumps({"custom_id": custom_id, "result": result}) + b"\n") * copies
            )
    stats["requests_received"] += min(done, len(requests))
    stats["batch_lines_processed"] += len(requests)
    stats["message_batches_ended"] += 1
    state.stats.merge(stats)
    state.stats.bill(billed, "chat")
    batch.ended = Ended(at, counts, path)


def batch_json(batch: AnthropicBatch, now: float, base_url: str) -> dict[str, Any]:
    """The ``message_batch`` object at ``now``; ``results_url`` points at ``base_url``."""
    ended = batch.ended
    if ended is not None:
        status = "ended"
        counts = ended.counts
    else:
        status = "canceling" if batch.cancel_at is not None else "in_progress"
        counts = {
            "processing": batch.total,
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
    results_url = (
        f"{base_url.rstrip('/')}/v1/messages/batches/{batch.id}/results" if ended else None
    )
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": counts,
        "ended_at": rfc3339(ended.at) if ended else None,
        "created_at": rfc3339(batch.created),
        "expires_at": rfc3339(batch.created + WINDOW_SECONDS),
        "archived_at": None,
        "cancel_initiated_at": rfc3339(batch.cancel_at) if batch.cancel_at is not None else None,
        "results_url": results_url,
    }


def observe(state: State, batch: AnthropicBatch, base_url: str) -> dict[str, Any]:
    """Advance ``batch`` to now and return its JSON."""
    now = time.time()
    advance(state, batch, now)
    return batch_json(batch, now, base_url)
