"""What the providers' admin reports share: daily buckets of the emulator's billing records
(`emulator.core.billing`), grouped, paged and filtered by project or workspace. The reports are
``emulator.openai.admin`` and ``emulator.anthropic.admin``.


OpenAI (``Authorization: Bearer sk-admin-...``): ``GET /v1/organization/usage/completions``
(``group_by=model``, ``group_by=batch``, ``api_key_id``, ``project_id``, ``service_tier``:
``default`` or ``priority``) and ``GET /v1/organization/costs`` (``group_by=line_item``:
``"<model>, input"``, ``"<model>, cached input"``, ``"<model>, output"``; ``project_id``), both
filtered by ``project_ids`` if given,
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

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from starlette.requests import Request

from emulator.core.billing import Charge, Family
from emulator.core.http_common import (
    api_key_of,
    state_of,
)

DAY = 86_400
Grouped = dict[tuple[Any, ...], list[Charge]]


def daily_buckets(start: float, end: float) -> list[tuple[float, float]]:
    """Daily buckets from ``start``'s UTC midnight up to ``end``."""
    first = start - start % DAY
    return [(s, min(s + DAY, end)) for s in range(int(first), int(end), DAY)] or [(start, end)]


Report = tuple[list[tuple[float, float, list[Any]]], str | None]  # buckets, next page


def grouped(charges: Iterable[Charge], key: Callable[[Charge], tuple[Any, ...]]) -> Grouped:
    groups: Grouped = defaultdict(list)
    for charge in charges:
        groups[key(charge)].append(charge)
    return groups


def report(
    request: Request, family: Family, start: float, end: float, results: Callable[..., list[Any]]
) -> Report:
    """One page of daily buckets (``limit``, ``page``: the offset of its first bucket), each
    with ``results`` of the charges to the admin key's organisation in it."""
    limit = int(request.query_params.get("limit", "7"))
    offset = int(request.query_params.get("page", "0") or "0")
    buckets = daily_buckets(start, end)
    shown = buckets[offset : offset + limit]
    following = str(offset + limit) if offset + limit < len(buckets) else None
    if not shown:
        return [], following
    billing = state_of(request).billing
    first, last = shown[0][0], shown[-1][1]
    charges = billing.charges(family, billing.org_of(api_key_of(request)), first, last)
    found = in_accounts(request, charges)
    by_day = grouped(found, lambda c: (int(c.at - first) // DAY,))
    return [(s, e, results(by_day.get((i,), []))) for i, (s, e) in enumerate(shown)], following


def in_accounts(request: Request, charges: Iterable[Charge]) -> list[Charge]:
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
