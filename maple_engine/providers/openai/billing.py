"""OpenAI's organization usage and costs reports, read with an admin key (``sk-admin-...``).

``GET /v1/organization/usage/completions`` (daily buckets, ``group_by=model`` and
``group_by=batch``) gives tokens; ``GET /v1/organization/costs`` (``group_by=line_item``, items
like ``"gpt-4o-mini-2024-07-18, input"``) gives dollars. Both page with ``next_page``.
"""

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from maple_engine.providers.base import BilledUsage
from maple_engine.providers.http import make_client, paged_data
from maple_engine.providers.openai import wire

USAGE = "/organization/usage/completions"
COSTS = "/organization/costs"
TIMEOUT_S = 60.0
FIX = "check OPENAI_BASE_URL (the API, ending in /v1) and the network"


def _day(bucket: dict[str, Any]) -> date:
    return datetime.fromtimestamp(int(bucket["start_time"]), UTC).date()


def billing_report(
    base_url: str | None, admin_key: str, first: date, last: date, *, by_account: bool = False
) -> list[BilledUsage]:
    """Tokens and dollars per day and model from ``first`` to ``last`` inclusive (and per
    project: ``group_by=project_id``, when ``by_account``)."""
    start = int(datetime.combine(first, time.min, UTC).timestamp())
    end = int(datetime.combine(last + timedelta(days=1), time.min, UTC).timestamp())
    window = {"start_time": start, "end_time": end, "bucket_width": "1d", "limit": 31}
    rows: dict[tuple[date, str, str | None], dict[str, Any]] = defaultdict(dict)
    headers = {"Authorization": f"Bearer {admin_key}"}
    project = ["project_id"] if by_account else []

    def row(bucket: dict[str, Any], model: str, result: dict[str, Any]) -> dict[str, Any]:
        return rows[(_day(bucket), model, result.get("project_id") if by_account else None)]

    with make_client(wire.openai_base_url(base_url), headers, TIMEOUT_S) as client:
        usage = window | {"group_by": ["model", "batch", *project]}
        for bucket in paged_data(client, USAGE, usage, fix=FIX):
            for result in bucket.get("results") or []:
                tokens = row(bucket, str(result.get("model") or ""), result)
                for name in ("input_tokens", "output_tokens"):
                    tokens[name] = tokens.get(name, 0) + int(result.get(name) or 0)
        costs = window | {"group_by": ["line_item", *project]}
        for bucket in paged_data(client, COSTS, costs, fix=FIX):
            for result in bucket.get("results") or []:
                model = str(result.get("line_item") or "").rsplit(", ", 1)[0]
                dollars = row(bucket, model, result)
                value = float((result.get("amount") or {}).get("value") or 0.0)
                dollars["cost_usd"] = dollars.get("cost_usd", 0.0) + value
    return [BilledUsage(d, m, **v, account=a) for (d, m, a), v in sorted(rows.items(), key=str)]
