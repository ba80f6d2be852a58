"""OpenAI's admin reports: ``GET /v1/organization/usage/completions`` and
``GET /v1/organization/costs`` (see ``emulator.core.admin``)."""

import time
from collections import defaultdict
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.core.admin import Report, grouped, report
from emulator.core.billing import Charge
from emulator.core.http_common import (
    api_key_of,
    openai_error,
    openai_json,
)

OPENAI_ADMIN_PREFIX = "sk-admin-"


def _openai_admin(request: Request) -> Response | tuple[float, float]:
    key = api_key_of(request)
    if not key:
        return openai_error(401, "You didn't provide an API key.")
    if not key.startswith(OPENAI_ADMIN_PREFIX):
        message = (
            "You have insufficient permissions for this operation: the organization usage and "
            "costs API needs an admin key (sk-admin-...)"
        )
        return openai_error(403, message, "invalid_request_error", None, "insufficient_permissions")
    try:
        start = int(request.query_params["start_time"])
        given = request.query_params.get("end_time")
        end = int(given) if given else time.time()
    except (KeyError, ValueError):
        return openai_error(400, "start_time is required (unix seconds).", param="start_time")
    return start, end


def _openai_page(report: Report) -> Response:
    shown, following = report
    buckets = [
        {"object": "bucket", "start_time": int(s), "end_time": int(e), "results": r}
        for s, e, r in shown
    ]
    page = {"object": "page", "data": buckets, "has_more": following is not None}
    return openai_json(page | {"next_page": following})


async def openai_usage(request: Request) -> Response:
    """``GET /v1/organization/usage/completions``."""
    window = _openai_admin(request)
    if isinstance(window, Response):
        return window
    groups = set(request.query_params.getlist("group_by"))

    def results(charges: list[Charge]) -> list[dict[str, Any]]:
        def key(c: Charge) -> tuple[Any, ...]:
            return (
                c.model if "model" in groups else None,
                (c.batch_id is not None) if "batch" in groups else None,
                c.api_key[-8:] if "api_key_id" in groups else None,
                c.project if "project_id" in groups else None,
                (c.service_tier or "default") if "service_tier" in groups else None,
            )

        return [
            {
                "object": "organization.usage.completions.result",
                "input_tokens": sum(c.input_tokens for c in found),
                "output_tokens": sum(c.output_tokens for c in found),
                "input_cached_tokens": sum(c.cache.read for c in found),
                "input_audio_tokens": 0,
                "output_audio_tokens": 0,
                "num_model_requests": len(found),
                "project_id": k[3],
                "user_id": None,
                "api_key_id": f"key_{k[2]}" if k[2] else None,
                "model": k[0],
                "batch": k[1],
                "service_tier": k[4],
            }
            for k, found in sorted(grouped(charges, key).items(), key=str)
        ]

    return _openai_page(report(request, "openai", *window, results))


async def openai_costs(request: Request) -> Response:
    """``GET /v1/organization/costs`` (daily buckets only, as OpenAI)."""
    window = _openai_admin(request)
    if isinstance(window, Response):
        return window
    groups = set(request.query_params.getlist("group_by"))
    by_item, by_project = "line_item" in groups, "project_id" in groups

    def results(charges: list[Charge]) -> list[dict[str, Any]]:
        amounts: dict[tuple[str | None, str | None], Decimal] = defaultdict(Decimal)
        for c in charges:  # a charge's cost split over its line items by their tokens
            kinds = {
                "input": c.input_tokens - c.cache.read,
                "cached input": c.cache.read,
                "output": c.output_tokens,
            }
            tokens = sum(kinds.values())
            for kind, count in kinds.items():
                if count or (kind == "input" and not tokens):
                    part = Decimal(count) / tokens if tokens else Decimal(1)
                    item = f"{c.model}, {kind}" if by_item else None
                    amounts[(item, c.project if by_project else None)] += c.cost_usd * part
        return [
            {
                "object": "organization.costs.result",
                "amount": {"value": float(value), "currency": "usd"},
                "line_item": item,
                "project_id": project,
            }
            for (item, project), value in sorted(amounts.items(), key=str)
        ]

    return _openai_page(report(request, "openai", *window, results))


ADMIN_ROUTES = [
    Route("/v1/organization/usage/completions", openai_usage, methods=["GET"]),
    Route("/v1/organization/costs", openai_costs, methods=["GET"]),
]
