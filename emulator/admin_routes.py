"""The providers' admin reports, served from the emulator's billing records (`emulator.billing`).

OpenAI (``Authorization: Bearer sk-admin-...``): ``GET /v1/organization/usage/completions``
(``group_by=model``, ``group_by=batch``, ``api_key_id``, ``project_id``) and ``GET
/v1/organization/costs`` (``group_by=line_item``: ``"<model>, input"``, ``"<model>, cached
input"``, ``"<model>, output"``; ``project_id``), both filtered by ``project_ids`` if given,
daily buckets in
``{"object": "page", "data": [{"object": "bucket", ...}], "has_more", "next_page"}``.
Anthropic (``x-api-key: sk-ant-admin...``): ``GET /v1/organizations/usage_report/messages``
(``group_by[]=model``, ``service_tier``, ``api_key_id``, ``workspace_id``) and ``GET
/v1/organizations/cost_report`` (``group_by[]=description``, ``workspace_id``; ``amount`` in cents
as a decimal string), both filtered by ``workspace_ids[]`` if given.
A charge's project is the ``OpenAI-Project`` header it was sent (or its batch created) with, its
workspace its key's (``--workspace``); spend with neither shows ``null``, as the default
project's and workspace's do. A key that is not an
admin key gets the provider's 403 (OpenAI) or 401 (Anthropic); each report shows the spend of
the admin key's organisation only, from every key of it.
"""

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.billing import Charge, Family
from emulator.http_common import (
    anthropic_error,
    anthropic_json,
    api_key_of,
    openai_error,
    openai_json,
    state_of,
)

DAY = 86_400
OPENAI_ADMIN_PREFIX = "sk-admin-"
ANTHROPIC_ADMIN_PREFIX = "sk-ant-admin"
Grouped = dict[tuple[Any, ...], list[Charge]]


def _buckets(start: float, end: float) -> list[tuple[float, float]]:
    """Daily buckets from ``start``'s UTC midnight up to ``end``."""
    first = start - start % DAY
    return [(s, min(s + DAY, end)) for s in range(int(first), int(end), DAY)] or [(start, end)]


Report = tuple[list[tuple[float, float, list[Any]]], str | None]  # buckets, next page


def _grouped(charges: Iterable[Charge], key: Callable[[Charge], tuple[Any, ...]]) -> Grouped:
    groups: Grouped = defaultdict(list)
    for charge in charges:
        groups[key(charge)].append(charge)
    return groups


def _report(
    request: Request, family: Family, start: float, end: float, results: Callable[..., list[Any]]
) -> Report:
    """One page of daily buckets (``limit``, ``page``: the offset of its first bucket), each
    with ``results`` of the charges to the admin key's organisation in it."""
    limit = int(request.query_params.get("limit", "7"))
    offset = int(request.query_params.get("page", "0") or "0")
    buckets = _buckets(start, end)
    shown = buckets[offset : offset + limit]
    following = str(offset + limit) if offset + limit < len(buckets) else None
    if not shown:
        return [], following
    billing = state_of(request).billing
    first, last = shown[0][0], shown[-1][1]
    charges = billing.charges(family, billing.org_of(api_key_of(request)), first, last)
    found = _in_accounts(request, charges)
    by_day = _grouped(found, lambda c: (int(c.at - first) // DAY,))
    return [(s, e, results(by_day.get((i,), []))) for i, (s, e) in enumerate(shown)], following


def _in_accounts(request: Request, charges: Iterable[Charge]) -> list[Charge]:
    """``charges`` of the projects (``project_ids``) or workspaces (``workspace_ids[]``) the
    report asks for, all when it names none."""
    params = request.query_params
    projects = set(params.getlist("project_ids"))
    workspaces = set(params.getlist("workspace_ids[]"))
    return [
        c
        for c in charges
        if (not projects or c.project in projects) and (not workspaces or c.workspace in workspaces)
    ]


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
            }
            for k, found in sorted(_grouped(charges, key).items(), key=str)
        ]

    return _openai_page(_report(request, "openai", *window, results))


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

    return _openai_page(_report(request, "openai", *window, results))


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
    return "batch" if c.batch_id is not None else "standard"


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
            for k, found in sorted(_grouped(charges, key).items(), key=str)
        ]

    return _anthropic_page(_report(request, "anthropic", *window, results))


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
        for (model, tier, workspace), found in sorted(_grouped(charges, key).items(), key=str):
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

    return _anthropic_page(_report(request, "anthropic", *window, results))


ADMIN_ROUTES = [
    Route("/v1/organization/usage/completions", openai_usage, methods=["GET"]),
    Route("/v1/organization/costs", openai_costs, methods=["GET"]),
    Route("/v1/organizations/usage_report/messages", anthropic_usage, methods=["GET"]),
    Route("/v1/organizations/cost_report", anthropic_costs, methods=["GET"]),
]
