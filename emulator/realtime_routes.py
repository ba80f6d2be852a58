"""Real-time endpoints (OpenAI chat/embeddings, Anthropic messages) with rate limiting.

Every response carries the provider's rate-limit headers. ``realtime_requests`` counts every
call, ``realtime_429`` every 429 answered (limiter or injected fault), ``requests_received``
every body that passed the limiter, and ``requests_billed`` every 200 (an embeddings call: one
per input text).
"""

import asyncio
import itertools
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from emulator import responses_api
from emulator.anthropic_engine import DEFAULT_VERSION, version_problem
from emulator.billing import Family
from emulator.faults import body_key
from emulator.flex import FLEX, RETRY_AFTER_S, UNAVAILABLE_MESSAGE, is_flex
from emulator.http_common import (
    anthropic_error,
    anthropic_json,
    api_key_of,
    check_auth,
    openai_error,
    openai_json,
    project_of,
    read_json,
    state_of,
)
from emulator.openai_engine import Outcome
from emulator.prompt_cache import CacheUse, anthropic_usage, openai_usage, organisation
from emulator.ratelimit import Decision, anthropic_headers, openai_headers, retry_headers
from emulator.replies import echo_text
from emulator.tokens import count_tokens, prompt_tokens

_RT_PREFIX = "realtime"
_REQUEST_IDS = itertools.count(1)


def _with_request_id(outcome: Outcome, family: Family) -> None:
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


def _estimate(payload: Any, path: str) -> int:
    if not isinstance(payload, dict):
        return 1
    messages = payload.get("messages")
    if isinstance(messages, list):
        return prompt_tokens(messages, payload.get("system")) + count_tokens(echo_text(messages))
    messages = responses_api.input_messages(payload) if path == responses_api.PATH else None
    if messages is not None:
        return responses_api.request_prompt_tokens(payload) + count_tokens(echo_text(messages))
    raw = payload.get("input")
    items = raw if isinstance(raw, list) else [raw]
    return sum(count_tokens(item) for item in items if isinstance(item, str)) or 1


def _account(
    request: Request, payload: Any, key: int, outcome: Outcome, *, family: Family, use: CacheUse
) -> None:
    state = state_of(request)
    stats = state.stats
    stats.add("requests_received")
    if outcome.fault is not None:
        stats.add(f"fault_{outcome.fault}")
    if outcome.status == 429:
        stats.add("realtime_429")
    if outcome.status == 200:
        stats.bill([hash((_RT_PREFIX, key, unit)) for unit in range(outcome.units)])
        model = str(payload.get("model", "")) if isinstance(payload, dict) else ""
        tokens = (outcome.prompt_tokens, outcome.completion_tokens)
        project = project_of(request, "openai_project_requests") if family == "openai" else None
        sender = api_key_of(request)
        state.billing.charge(
            family, sender, model, tokens, at=time.time(), cache=use, project=project
        )


async def _admit(request: Request) -> tuple[Any, Decision | None, Response | None]:
    state = state_of(request)
    state.stats.add("realtime_requests")
    refused = check_auth(request)
    if refused is not None:
        return None, None, refused
    payload, bad = await read_json(request)
    if bad is not None:
        return None, None, bad
    decision = state.limiter.check(_estimate(payload, request.url.path))
    if not decision.allowed:
        state.stats.add("realtime_429")
    return payload, decision, None


async def _answer_latency(request: Request) -> None:
    """Wait as long as the configured latency says (``realtime_latency_s``), in one of the
    ``server_slots`` when the server's capacity is bounded (waiting for a slot first)."""
    state = state_of(request)
    low, high = state.config.realtime_latency_s
    state.in_flight += 1  # one event loop serves every route: no lock needed
    state.stats.maximum("realtime_max_in_flight", state.in_flight)
    try:
        if state.config.server_slots:
            if state.slots is None:
                state.slots = asyncio.Semaphore(state.config.server_slots)
            async with state.slots:
                await asyncio.sleep(state.latency.uniform(low, high))
        elif high > 0:
            await asyncio.sleep(state.latency.uniform(low, high))
    finally:
        state.in_flight -= 1


def _openai_limited(decision: Decision, model: str) -> Response:
    headers = openai_headers(decision) | retry_headers(decision)
    if decision.too_large:
        message = (
            f"Request too large for {model}: it needs more tokens than the per-second share of "
            "the TPM limit allows. Reduce the input or output tokens."
        )
    else:
        message = (
            f"Rate limit reached for {model} on {decision.kind} per min: "
            f"Please try again in {round(decision.retry_after * 1000)}ms."
        )
    response = openai_error(429, message, decision.kind, None, "rate_limit_exceeded")
    response.headers.update(headers)
    return response


async def openai_realtime(request: Request) -> Response:
    """``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/embeddings``."""
    payload, decision, refused = await _admit(request)
    if refused is not None or decision is None:
        return refused or openai_error(500, "internal error", "server_error")
    model = str(payload.get("model", "")) if isinstance(payload, dict) else ""
    if not decision.allowed:
        return _openai_limited(decision, model)
    await _answer_latency(request)
    state = state_of(request)
    if is_flex(payload):
        state.stats.add("flex_requests")
        if state.flex.draw_unavailable():
            state.stats.add("flex_429")
            state.stats.add("realtime_429")
            response = openai_error(
                429, UNAVAILABLE_MESSAGE, "rate_limit_error", None, "resource_unavailable"
            )
            response.headers.update(openai_headers(decision))
            response.headers["retry-after-ms"] = str(int(RETRY_AFTER_S * 1000))
            return response
        await asyncio.sleep(state.config.flex_delay_s)
    key = body_key(payload)
    outcome = state.openai.run(request.url.path, payload, key)
    use = CacheUse()
    if outcome.status == 200 and is_flex(payload):
        outcome.body["service_tier"] = FLEX
    if outcome.status == 200 and request.url.path.endswith("/chat/completions"):
        use = state.prompt_cache.openai(organisation(request.headers), payload)
        openai_usage(outcome.body, use)
        state.stats.cached(use)
    _account(request, payload, key, outcome, family="openai", use=use)
    _with_request_id(outcome, "openai")
    # a model server (``server_slots``) sends no rate-limit headers: it has a capacity, no rate
    limits = {} if state.config.server_slots else openai_headers(decision)
    headers = limits | {"openai-processing-ms": "1", "openai-model": model}
    if outcome.status == 429:
        headers |= {"retry-after": "1", "retry-after-ms": "1000"}
    return openai_json(outcome.body, outcome.status, headers)


async def anthropic_messages(request: Request) -> Response:
    """``POST /v1/messages``."""
    payload, decision, refused = await _admit(request)
    if refused is not None or decision is None:
        return refused or anthropic_error(500, "internal error")
    headers = anthropic_headers(decision, time.time())
    if not decision.allowed:
        if decision.too_large:
            message = "Prompt is too large for the per-second share of your token rate limit."
        else:
            limit = decision.requests[0] if decision.kind == "requests" else decision.tokens[0]
            message = (
                f"This request would exceed your organization's rate limit of {limit} "
                f"{decision.kind} per minute."
            )
        return anthropic_error(429, message, headers | retry_headers(decision))
    await _answer_latency(request)
    key = body_key(payload)
    state = state_of(request)
    version = request.headers.get("anthropic-version", DEFAULT_VERSION)
    if (wrong := version_problem(version)) is not None:
        return anthropic_error(400, wrong, headers)
    outcome = state.anthropic.run(payload, key, version=version)
    use = CacheUse()
    if outcome.status == 200:
        use = state.prompt_cache.anthropic(organisation(request.headers), payload)
        anthropic_usage(outcome.body, use)
        state.stats.cached(use)
    _account(request, payload, key, outcome, family="anthropic", use=use)
    _with_request_id(outcome, "anthropic")
    if outcome.status == 429:
        headers |= {"retry-after": "1", "retry-after-ms": "1000"}
    return anthropic_json(outcome.body, outcome.status, headers)
