"""A deadline's last lane, OpenAI's priority tier, through ``maple enrich`` against the
emulator over HTTP: the rows sent past the deadline go with ``service_tier: "priority"``, are
booked at the tier's price (twice the standard), the summary shows what they cost over standard
real time, and ``maple reconcile`` matches the emulator's bill."""

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from resources.costs import CostTracker
from tests.e2e.cli import NO_OPENAI_KEY, maple
from tests.e2e.test_deadline import summary_number

ROWS = 40
ADMIN = "sk-admin-priority"


@pytest.mark.slow  # about 10 s
def test_rows_past_the_deadline_go_priority_booked_at_the_tiers_price(tmp_path: Path) -> None:
    source = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i} " + "word " * 40 for i in range(ROWS)]}).write_csv(source)
    store = tmp_path / "store"
    # A batch takes 25 s; the deadline, 0.2 s, has passed when the first shard goes out: every
    # row goes through the priority tier.
    with EmulatorServer(EmulatorConfig(batch_seconds=25.0)) as server:
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-maple"}
        result = maple(
            "enrich", str(source), "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini",
            "--provider", "openai", "--storage", str(store), "--job", "urgent",
            "--output", str(tmp_path / "out.parquet"), "--poll-interval", "0.2", "--quiet",
            "--max-requests-per-batch", "20", "--deadline", "0.2s", drop=NO_OPENAI_KEY, **env,
        )  # fmt: skip
        stats = server.stats()
        today = datetime.now(UTC).date().isoformat()
        bill = maple(
            "reconcile", "--storage", str(store), "--provider", "openai",
            drop=NO_OPENAI_KEY, **env, OPENAI_ADMIN_KEY=ADMIN,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    priority_rows = summary_number(result.stdout, "priority rows")
    assert priority_rows == ROWS and stats["priority_requests"] == ROWS
    assert stats["batches_created"] == 0
    assert stats["bodies_billed_twice"] == 0
    with CostTracker(storage_root=str(store)) as costs:
        entries = costs.job_entries("urgent")
    priority = [e for e in entries if e.batch_id and e.batch_id.startswith("rt-prio-")]
    assert sum(e.requests for e in priority) == priority_rows
    for entry in priority:  # twice what the same tokens cost at standard real-time prices
        assert entry.cost_usd == pytest.approx(2 * entry.realtime_cost_usd, rel=1e-12)
        assert entry.cost_usd > 0
    premium = sum(e.cost_usd - e.realtime_cost_usd for e in priority)
    line = next(li for li in result.stdout.splitlines() if li.startswith("priority rows"))
    assert f"{premium:.6f} more than at standard real-time prices" in line
    assert bill.returncode == 0, bill.stdout + bill.stderr
    _header, _rule, *rows = bill.stdout.splitlines()
    day, model, ledger_tokens, provider_tokens, ledger_usd, provider_usd, *_, verdict = rows[
        0
    ].split()
    assert (day, model, verdict) == (today, "gpt-4o-mini", "ok")
    assert ledger_tokens == provider_tokens
    assert float(ledger_usd) == pytest.approx(float(provider_usd), rel=0.01)
