"""Anthropic's usage and cost reports, read with an Admin API key (``sk-ant-admin...``).

``GET /v1/organizations/usage_report/messages`` (daily buckets, ``group_by[]=model``) gives
tokens (uncached input, cache creation and cache reads are all input); ``GET
/v1/organizations/cost_report`` (``group_by[]=description``, ``amount`` in cents as a decimal
string) gives dollars. Both page with ``next_page``.
"""

from collections import defaultdict
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from maple_engine.providers.anthropic.messages import ANTHROPIC_VERSION, anthropic_base_url
from maple_engine.providers.base import BilledUsage
from maple_engine.providers.http import make_client, paged_data

USAGE = "/v1/organizations/usage_report/messages"
COSTS = "/v1/organizations/cost_report"
TIMEOUT_S = 60.0
FIX = "check ANTHROPIC_BASE_URL (the API's root) and the network"


def _day(bucket: dict[str, Any]) -> date:
    return datetime.fromisoformat(str(bucket["starting_at"]).replace("Z", "+00:00")).date()


def _input(result: dict[str, Any]) -> int:
    created = result.get("cache_creation") or {}
    return (
        int(result.get("uncached_input_tokens") or 0)
        + int(result.get("cache_read_input_tokens") or 0)
        + sum(int(v or 0) for v in created.values())
    )


def billing_report(
    base_url: str | None, admin_key: str, first: date, last: date, *, by_account: bool = False
) -> list[BilledUsage]:
    """Tokens and dollars per day and model from ``first`` to ``last`` inclusive (and per
    workspace: ``group_by[]=workspace_id``, when ``by_account``)."""
    window = {
        "starting_at": f"{datetime.combine(first, time.min).isoformat()}Z",
        "ending_at": f"{datetime.combine(last + timedelta(days=1), time.min).isoformat()}Z",
        "bucket_width": "1d",
        "limit": 31,
    }
    rows: dict[tuple[date, str, str | None], dict[str, Any]] = defaultdict(dict)
    headers = {"x-api-key": admin_key, "anthropic-version": ANTHROPIC_VERSION}
    workspace = ["workspace_id"] if by_account else []

    def row(bucket: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        account = result.get("workspace_id") if by_account else None
        return rows[(_day(bucket), str(result.get("model") or ""), account)]

    with make_client(anthropic_base_url(base_url), headers, TIMEOUT_S) as client:
        usage = window | {"group_by[]": ["model", *workspace]}
        for bucket in paged_data(client, USAGE, usage, fix=FIX):
            for result in bucket.get("results") or []:
                tokens = row(bucket, result)
                tokens["input_tokens"] = tokens.get("input_tokens", 0) + _input(result)
                output = int(result.get("output_tokens") or 0)
                tokens["output_tokens"] = tokens.get("output_tokens", 0) + output
        costs = window | {"group_by[]": ["description", *workspace]}
        costs.pop("bucket_width")
        for bucket in paged_data(client, COSTS, costs, fix=FIX):
            for result in bucket.get("results") or []:
                dollars = row(bucket, result)
                amount = float(Decimal(str(result.get("amount") or "0")) / 100)
                dollars["cost_usd"] = dollars.get("cost_usd", 0.0) + amount
    return [BilledUsage(d, m, **v, account=a) for (d, m, a), v in sorted(rows.items(), key=str)]
