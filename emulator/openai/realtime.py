"""OpenAI's real-time endpoints: chat completions, the Responses API and embeddings, with
rate limiting, the flex and priority tiers and OpenAI's rate-limit headers."""

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from emulator.core.faults import body_key
from emulator.core.flex import (
    FLEX,
    PRIORITY,
    RETRY_AFTER_S,
    UNAVAILABLE_MESSAGE,
    is_flex,
    is_priority,
)
from emulator.core.http_common import openai_error, openai_json, state_of
from emulator.core.prompt_cache import CacheUse, openai_usage, organisation
from emulator.core.ratelimit import Decision, openai_headers, retry_headers
from emulator.core.realtime import (
    account,
    admit,
    answer_latency,
    messages_estimate,
    with_request_id,
)
from emulator.core.replies import echo_text
from emulator.core.tokens import count_tokens
from emulator.openai import responses as responses_api


def _estimate(path: str) -> Callable[[Any], int]:
    """What the rate limiter counts for a body sent to ``path``: a Responses API body's input
    and echo reply, else its messages or embedding inputs."""

    def count(payload: Any) -> int:
        if path != responses_api.PATH or not isinstance(payload, dict):
            return messages_estimate(payload)
        chat = isinstance(payload.get("messages"), list)
        messages = None if chat else responses_api.input_messages(payload)
        if messages is None:
            return messages_estimate(payload)
        return responses_api.request_prompt_tokens(payload) + count_tokens(echo_text(messages))

    return count


def _limited(decision: Decision, model: str) -> Response:
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
    payload, decision, refused = await admit(request, _estimate(request.url.path))
    if refused is not None or decision is None:
        return refused or openai_error(500, "internal error", "server_error")
    model = str(payload.get("model", "")) if isinstance(payload, dict) else ""
    if not decision.allowed:
        return _limited(decision, model)
    state = state_of(request)
    priority = is_priority(payload)
    await answer_latency(request, state.config.priority_speedup if priority else 1.0)
    if priority:
        state.stats.add("priority_requests")
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
    if outcome.status == 200 and (is_flex(payload) or priority):
        outcome.body["service_tier"] = PRIORITY if priority else FLEX
    if outcome.status == 200 and request.url.path.endswith("/chat/completions"):
        use = state.prompt_cache.openai(organisation(request.headers), payload)
        openai_usage(outcome.body, use)
        state.stats.cached(use)
    account(request, payload, key, outcome, family="openai", use=use, priority=priority)
    with_request_id(outcome, "openai")
    # a model server (``server_slots``) sends no rate-limit headers: it has a capacity, no rate
    limits = {} if state.config.server_slots else openai_headers(decision)
    headers = limits | {"openai-processing-ms": "1", "openai-model": model}
    if outcome.status == 429:
        headers |= {"retry-after": "1", "retry-after-ms": "1000"}
    return openai_json(outcome.body, outcome.status, headers)
