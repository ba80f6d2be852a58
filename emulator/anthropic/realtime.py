"""Anthropic's real-time endpoint, ``POST /v1/messages``, with rate limiting and Anthropic's
rate-limit headers."""

import time

from starlette.requests import Request
from starlette.responses import Response

from emulator.anthropic.engine import DEFAULT_VERSION, version_problem
from emulator.core.faults import body_key
from emulator.core.http_common import anthropic_error, anthropic_json, state_of
from emulator.core.prompt_cache import CacheUse, anthropic_usage, organisation
from emulator.core.ratelimit import anthropic_headers, retry_headers
from emulator.core.realtime import account, admit, answer_latency, with_request_id


async def anthropic_messages(request: Request) -> Response:
    """``POST /v1/messages``."""
    payload, decision, refused = await admit(request)
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
    await answer_latency(request)
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
    account(request, payload, key, outcome, family="anthropic", use=use)
    with_request_id(outcome, "anthropic")
    if outcome.status == 429:
        headers |= {"retry-after": "1", "retry-after-ms": "1000"}
    return anthropic_json(outcome.body, outcome.status, headers)
