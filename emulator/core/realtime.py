"""What every real-time endpoint shares: admission (auth, body, rate limiter), the answer's
latency, accounting and request IDs; the endpoints are ``emulator.openai.realtime`` and
``emulator.anthropic.realtime``.

Every response carries the provider's rate-limit headers. ``realtime_requests`` counts every
call, ``realtime_429`` every 429 answered (limiter or injected fault), ``requests_received``
every body that passed the limiter, and ``requests_billed`` every 200 (an embeddings call: one
per input text).
"""

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from emulator.core.billing import Family
from emulator.core.http_common import (
    api_key_of,
    check_auth,
    project_of,
    read_json,
    state_of,
)
from emulator.core.outcome import Outcome
from emulator.core.prompt_cache import CacheUse
from emulator.core.ratelimit import Decision
from emulator.core.replies import echo_text
from emulator.core.tokens import count_tokens, prompt_tokens

_RT_PREFIX = "realtime"
_REQUEST_IDS = itertools.count(1)


def with_request_id(outcome: Outcome, family: Family) -> None:
    """A server error names its request, as the providers' do (OpenAI in the message,
    Anthropic in ``request_id``): two transient failures of one body differ, and a client can
    tell them from a server that answers every send of it the same way."""
    if outcome.status < 500:
        return
    request_id = f"req_emu{next(_REQUEST_IDS):012d}"
    if family == "anthropic":
        outcome.body["request_id"] = request_id
        return
    error = outcome.body.get("error")
    if isinstance(error, dict):
        error["message"] = f"{error.get('message', '')} (request ID {request_id})"


def messages_estimate(payload: Any) -> int:
    """The tokens the rate limiter counts for a body of ``messages`` (prompt and echo reply),
    or an embeddings ``input``; 1 at least."""
    if not isinstance(payload, dict):
        return 1
    messages = payload.get("messages")
    if isinstance(messages, list):
        return prompt_tokens(messages, payload.get("system")) + count_tokens(echo_text(messages))
    raw = payload.get("input")
    items = raw if isinstance(raw, list) else [raw]
    return sum(count_tokens(item) for item in items if isinstance(item, str)) or 1


def account(
    request: Request,
    payload: Any,
    key: int,
    outcome: Outcome,
    *,
    family: Family,
    use: CacheUse,
    priority: bool = False,
) -> None:
    state = state_of(request)
    stats = state.stats
    stats.add("requests_received")
    if outcome.fault is not None:
        stats.add(f"fault_{outcome.fault}")
    if outcome.status == 429:
        stats.add("realtime_429")
    if outcome.status == 200:
        stats.bill([hash((_RT_PREFIX, key, unit)) for unit in range(outcome.units)], outcome.kind)
        stats.add("file_parts", outcome.file_parts)
        model = str(payload.get("model", "")) if isinstance(payload, dict) else ""
        tokens = (outcome.prompt_tokens, outcome.completion_tokens)
        project = project_of(request, "openai_project_requests") if family == "openai" else None
        sender = api_key_of(request)
        state.billing.charge(
            family,
            sender,
            model,
            tokens,
            at=time.time(),
            cache=use,
            project=project,
            priority=priority,
        )


async def admit(
    request: Request, estimate: Callable[[Any], int] = messages_estimate
) -> tuple[Any, Decision | None, Response | None]:
    """Count the call, check its key and read its body, then ask the rate limiter for the
    tokens ``estimate`` counts; a refusal is the response to send."""
    state = state_of(request)
    state.stats.add("realtime_requests")
    refused = check_auth(request)
    if refused is not None:
        return None, None, refused
    payload, bad = await read_json(request)
    if bad is not None:
        return None, None, bad
    decision = state.limiter.check(estimate(payload))
    if not decision.allowed:
        state.stats.add("realtime_429")
    return payload, decision, None


async def answer_latency(request: Request, speedup: float = 1.0) -> None:
    """Wait as long as the configured latency says (``realtime_latency_s``, divided by
    ``speedup``: the priority tier's), in one of the ``server_slots`` when the server's
    capacity is bounded (waiting for a slot first)."""
    state = state_of(request)
    low, high = state.config.realtime_latency_s
    state.in_flight += 1  # one event loop serves every route: no lock needed
    state.stats.maximum("realtime_max_in_flight", state.in_flight)
    try:
        if state.config.server_slots:
            if state.slots is None:
                state.slots = asyncio.Semaphore(state.config.server_slots)
            async with state.slots:
                await asyncio.sleep(state.latency.uniform(low, high) / speedup)
        elif high > 0:
            await asyncio.sleep(state.latency.uniform(low, high) / speedup)
    finally:
        state.in_flight -= 1
