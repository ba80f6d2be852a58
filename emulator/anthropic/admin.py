"""Anthropic's admin reports: ``GET /v1/organizations/usage_report/messages`` and
``GET /v1/organizations/cost_report`` (see ``emulator.core.admin``)."""

import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.core.admin import Report, grouped, report
from emulator.core.billing import Charge
from emulator.core.http_common import (
    anthropic_error,
    anthropic_json,
    api_key_of,
)

ANTHROPIC_ADMIN_PREFIX = "sk-ant-admin"


def _anthropic_admin(request: Request) -> Response | tuple[float, float]:
    key = api_key_of(request)
    if not key.startswith(ANTHROPIC_ADMIN_PREFIX):
        return anthropic_error(401, "invalid x-api-key: the Admin API needs an admin key")
    try:
        params = request.query_params
        start = datetime.fromisoformat(params["starting_at"]).replace(tzinfo=UTC).timestamp()
        end_at = params.get("ending_at")
        end = (
            datetime.fromisoformat(end_at).replace(tzinfo=UTC).timestamp()
            if end_at
            else time.time()
        )
    except (KeyError, ValueError):
        return anthropic_error(400, "starting_at: a RFC 3339 timestamp is required")
    return start, end


def _anthropic_page(report: Report) -> Response:
    shown, following = report
    buckets = [{"starting_at": _iso(s), "ending_at": _iso(e), "results": r} for s, e, r in shown]
    page = {"data": buckets, "has_more": following is not None, "next_page": following}
    return anthropic_json(page)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tier(c: Charge) -> str:
    return c.service_tier or ("batch" if c.batch_id is not None else "standard")


async def anthropic_usage(request: Request) -> Response:
    """``GET /v1/organizations/usage_report/messages``."""
    window = _anthropic_admin(request)
    if isinstance(window, Response):
        return window
    groups = set(request.query_params.getlist("group_by[]"))

    def results(charges: list[Charge]) -> list[dict[str, Any]]:
        def key(c: Charge) -> tuple[Any, ...]:
            return (
                c.model if "model" in groups else None,
                _tier(c) if "service_tier" in groups else None,
                f"apikey_{c.api_key[-8:]}" if "api_key_id" in groups else None,
                c.workspace if "workspace_id" in groups else None,
            )

        return [
            {
                "uncached_input_tokens": sum(c.uncached_input_tokens for c in found),
                "cache_creation": {
                    "ephemeral_1h_input_tokens": sum(c.cache_write_1h_tokens for c in found),
                    "ephemeral_5m_input_tokens": sum(
                        c.cache.write - c.cache_write_1h_tokens for c in found
                    ),
                },
                "cache_read_input_tokens": sum(c.cache.read for c in found),
                "output_tokens": sum(c.output_tokens for c in found),
                "server_tool_use": {"web_search_requests": 0},
                "api_key_id": k[2],
                "workspace_id": k[3],
                "model": k[0],
                "service_tier": k[1],
                "context_window": None,
            }
            for k, found in sorted(grouped(charges, key).items(), key=str)
        ]

    return _anthropic_page(report(request, "anthropic", *window, results))


async def anthropic_costs(request: Request) -> Response:
    """``GET /v1/organizations/cost_report`` (``amount``: cents, a decimal string)."""
    window = _anthropic_admin(request)
    if isinstance(window, Response):
        return window
    groups = set(request.query_params.getlist("group_by[]"))
    described, by_workspace = "description" in groups, "workspace_id" in groups

    def results(charges: list[Charge]) -> list[dict[str, Any]]:
        def key(c: Charge) -> tuple[Any, ...]:
            tier = (c.model, _tier(c)) if described else (None, None)
            return (*tier, c.workspace if by_workspace else None)

        rows = []
        for (model, tier, workspace), found in sorted(grouped(charges, key).items(), key=str):
            cents = sum((c.cost_usd for c in found), Decimal(0)) * 100
            rows.append(
                {
                    "currency": "USD",
                    "amount": f"{cents:.6f}",
                    "workspace_id": workspace,
                    "description": f"{model} Usage - Input and Output Tokens" if model else None,
                    "cost_type": "tokens" if described else None,
                    "context_window": "0-200k" if described else None,
                    "model": model,
                    "service_tier": tier,
                    "token_type": None,
                }
            )
        return rows

    return _anthropic_page(report(request, "anthropic", *window, results))


ADMIN_ROUTES = [
    Route("/v1/organizations/usage_report/messages", anthropic_usage, methods=["GET"]),
    Route("/v1/organizations/cost_report", anthropic_costs, methods=["GET"]),
]
