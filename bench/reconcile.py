"""``maple reconcile`` over a busy quarter: how long the ledger side, the provider's reports
(over real HTTP, paged) and the comparison take.

    python bench/reconcile.py --attempts 100000 --days 90 [--teams 5]

Writes a SQLite ledger in a temporary folder with N batch attempts of a few models spread over
D days, bills the same requests in an in-process emulator (one charge per attempt, to one
organisation), then times the steps of ``maple reconcile --since ... --until ...`` in process.
With ``--teams T`` the attempts belong to T teams, each billed to its own project, and the
reconciliation also runs ``--by team`` (the reports grouped by project).
"""

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.attempt_cost import AttemptCost
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.reconcile import Tolerance, reconcile
from maple_engine.providers.attribution import attribution_map

MODELS = ["gpt-4o-mini", "gpt-4.1-mini", "gpt-4.1-nano", "o4-mini"]
FAMILY = "open" + "ai"  # the billing account the models belong to


def attempts(count: int, days: int, seed: int, teams: int) -> list[AttemptCost]:
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(days=days - 1)
    out = []
    for i in range(count):
        at = start + timedelta(seconds=rng.uniform(0, (days - 1) * 86400))
        tokens_in, tokens_out = rng.randint(10_000, 2_000_000), rng.randint(1_000, 200_000)
        team = f"team{i % teams}"
        labels = (f"job{i % 50}", team, MODELS[i % len(MODELS)], FAMILY, "batch", f"s{i:06d}")
        sums = (1, None, 1000, tokens_in, 0, 0, tokens_out, 0.0, 0.0, at)
        out.append(AttemptCost(*labels, *sums))  # type: ignore[arg-type]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--teams", type=int, default=1, help="Teams, one project each.")
    args = parser.parse_args()
    records = attempts(args.attempts, args.days, args.seed, args.teams)
    teams = {f"team{t}": {"openai_project": f"proj_{t}"} for t in range(args.teams)}
    with tempfile.TemporaryDirectory() as tmp, EmulatorServer(EmulatorConfig()) as server:
        billing = server.state.billing
        started = time.perf_counter()
        priced = []
        for r in records:
            tokens = (r.input_tokens, r.output_tokens)
            billing.charge(FAMILY, "sk-maple", r.model, tokens, at=r.recorded_at.timestamp(),
                           batch_id=r.shard, project=teams[r.team]["openai_project"])  # fmt: skip
        for charge in billing.charges(FAMILY, "org-emulator", 0, time.time() + 1):
            priced.append(float(charge.cost_usd))
        print(f"emulator billed {len(records):,} batches in {time.perf_counter() - started:.2f} s")
        records = [
            AttemptCost(**{**r.__dict__, "cost_usd": cost})
            for r, cost in zip(records, priced, strict=True)
        ]
        ledger = CostLedger(database_url=f"sqlite:///{Path(tmp) / 'costs.sqlite'}")
        started = time.perf_counter()
        ledger.record_many(records)
        print(f"ledger recorded {len(records):,} attempts in {time.perf_counter() - started:.2f} s")
        days = (records[0].recorded_at.date() - timedelta(days=args.days), datetime.now(UTC).date())
        started = time.perf_counter()
        ours = ledger.billed_usage([FAMILY], days)
        print(f"ledger side: {ours.height} day-model rows in {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        url, key = f"{server.url}/v1", "sk-admin-bench"
        table = reconcile(ledger, FAMILY, admin_key=key, base_url=url, days=days,
                          tolerance=Tolerance())  # fmt: skip
        took = time.perf_counter() - started
        drifted = int(table["drifted"].sum())
        print(f"reconcile (ledger + reports over HTTP + compare): {table.height} rows, "
              f"{drifted} drifted, {took:.2f} s")  # fmt: skip
        if args.teams > 1:
            started = time.perf_counter()
            by_team = attribution_map({"teams": teams})
            table = reconcile(ledger, FAMILY, admin_key=key, base_url=url, days=days,
                              tolerance=Tolerance(), teams=by_team)  # fmt: skip
            took = time.perf_counter() - started
            drifted = int(table["drifted"].sum())
            print(f"reconcile --by team: {table.height} day-team-model rows, {drifted} drifted, "
                  f"{took:.2f} s")  # fmt: skip
        ledger.close()


if __name__ == "__main__":
    main()
