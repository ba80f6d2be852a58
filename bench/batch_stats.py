"""``maple stats`` over a large batch history: how long reading it, the percentiles, the charts
and the HTML report take, and the recording rate of the history itself.

    python bench/batch_stats.py --batches 20000

Writes a SQLite ledger in a temporary folder with N batches of a few providers and models
(log-normal turnarounds around 2 h, 40-50k requests each, as a study of ~580 real batches
found), recorded the way polls record them (``CostLedger.record_batches``, 100 per poll), then
times each step of ``maple stats --csv --png --html`` in process.
"""

import argparse
import math
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.model import BatchState, Submission
from maple_engine.report.batch_stats import batch_table, percentile_table, readable
from maple_engine.report.charts import chart_pngs
from maple_engine.report.html_report import html_report

QUEUES = [
    ("openai", "gpt-4o-mini"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-2.5-flash"),
]


def polls(count: int, seed: int) -> list[tuple[BatchLabels, list[tuple[Submission, BatchState]]]]:
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(days=30)
    out = []
    for first in range(0, count, 100):
        provider, model = QUEUES[(first // 100) % len(QUEUES)]
        group = []
        for i in range(first, min(first + 100, count)):
            created = start + timedelta(seconds=rng.uniform(0, 30 * 86400))
            seconds = 7200 * math.exp(rng.gauss(0, 0.8))
            requests = rng.randint(40_000, 50_000)
            batch_id = f"batch_{i:07d}"
            sub = Submission(provider, f"job{i % 40}", f"s{i:05d}", 1, batch_id, requests, "h",
                             created.isoformat())  # fmt: skip
            times = (("created", created.timestamp()), ("ended", created.timestamp() + seconds))
            group.append(
                (sub, BatchState(batch_id, "completed", True, total=requests, times=times))
            )
        out.append((BatchLabels(model, "team"), group))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, CostLedger(storage_root=tmp) as ledger:
        batches = polls(args.batches, args.seed)
        started = time.perf_counter()
        for labels, group in batches:
            ledger.record_batches(labels, group)
        record_s = time.perf_counter() - started
        steps: dict[str, float] = {}
        t = time.perf_counter()
        history = ledger.batch_history()
        steps["read history"] = time.perf_counter() - t
        t = time.perf_counter()
        rows = readable(percentile_table(history))
        steps["percentiles"] = time.perf_counter() - t
        t = time.perf_counter()
        batch_table(history).write_csv(Path(tmp) / "batches.csv")
        steps["csv"] = time.perf_counter() - t
        t = time.perf_counter()
        pngs = chart_pngs(history)
        steps["3 charts"] = time.perf_counter() - t
        t = time.perf_counter()
        page = html_report("bench", "every batch", rows, pngs)
        steps["html"] = time.perf_counter() - t
    print(f"batches            {history.height:,}")
    print(f"record (100/poll)  {record_s:.2f} s  ({args.batches / record_s:,.0f} batches/s)")
    for name, seconds in steps.items():
        print(f"{name:<18} {seconds:.2f} s")
    print(f"total stats        {sum(steps.values()):.2f} s")
    print(f"html size          {len(page) / 1024:,.0f} KiB")


if __name__ == "__main__":
    main()
