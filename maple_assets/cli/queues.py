"""``maple status``'s view of the provider queues: per provider and model, the work enqueued in
batches and the work waiting locally, with the limit in force (configured jobs say theirs); and
of the real-time rate limits shared through ``MAPLE_COST_DB``: who holds a share of which."""

from typing import Any

from maple_assets.cli.tables import render
from maple_assets.graph.admission import wait_message
from maple_assets.wiring import cost_ledger, ledger_exists
from maple_engine.ledger.queues import usage_by_queue
from maple_engine.ledger.rate_holders import holders
from maple_engine.ledger.schema import queue_slots
from maple_engine.settings import Settings
from maple_engine.storage.layout import QUEUES, JobLayout
from maple_engine.storage.storage import Storage


def queue_status(storage: Storage) -> list[dict[str, Any]]:
    """One entry per queue with work in it or a learned limit."""
    rows: dict[str, dict[str, Any]] = {}
    if ledger_exists(storage.root):
        with cost_ledger(storage.root) as costs, costs.transaction() as conn:
            for entry in usage_by_queue(conn, queue_slots):
                rows[str(entry["queue"])] = dict(entry)
    for key in storage.list_keys(QUEUES):
        if not key.endswith(".json") or key.count("/") < 2:
            continue
        record = storage.read_json(key)
        provider, model = key.removeprefix(f"{QUEUES}/").removesuffix(".json").split("/", 1)
        entry = rows.setdefault(
            f"{provider}:{model}",
            {"queue": f"{provider}:{model}", "enqueued": 0, "batches": 0, "waiting": 0, "jobs": []},
        )
        entry["learned_limit"] = record.get("limit")
        entry["unit"] = record.get("unit", "tokens")
    return sorted(rows.values(), key=lambda e: str(e["queue"]))


def queue_lines(queues: list[dict[str, Any]]) -> list[str]:
    if not queues:
        return []
    rows = []
    for q in queues:
        limit = q.get("learned_limit")
        shown = f"learned {limit:,}" if limit is not None else "configured or unknown"
        jobs = ", ".join(q.get("jobs") or []) or "-"
        rows.append(
            [
                q["queue"],
                f"{q['enqueued']:,}",
                str(q["batches"]),
                str(q["waiting"]),
                f"{shown}; {jobs}",
            ]
        )
    header = ["provider queue", "enqueued", "batches", "waiting", "limit / jobs"]
    return ["", render(header, rows, align="lrrrl")]


def job_queue_note(storage: Storage, job: str) -> str:
    key = JobLayout(job).queue_wait
    return wait_message(dict(storage.read_json(key))) if storage.exists(key) else ""


def rate_holder_lines(root: str) -> list[str]:
    """One line per sender holding a share of a real-time limit (``rate_holders``), when the
    limits are shared through ``MAPLE_COST_DB``."""
    if not Settings.load().cost_db:
        return []
    with cost_ledger(root) as costs, costs.transaction() as conn:
        held = holders(conn)
    if not held:
        return []
    live: dict[str, int] = {}
    for h in held:
        live[h.scope] = live.get(h.scope, 0) + h.live
    rows = [
        [h.scope, f"1/{live[h.scope]}" if h.live else "gone", h.host, str(h.pid),
         f"{h.held_s:,.0f} s", f"{h.silent_s:.1f} s", h.sender]
        for h in held
    ]  # fmt: skip
    header = ["real-time limit", "share", "host", "pid", "held", "last beat", "sender"]
    return ["", render(header, rows, align="llllrrl")]
