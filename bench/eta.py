"""How well the expected finish (ETA) covers the real one: N jobs on an emulator whose batches
take ``--batch-seconds`` plus ``--per-1k`` per 1,000 requests (log-normal spread), each job's
ETA read through ``JobHandle.status()`` as soon as it has one (its first batch out), then at
every change, against the moment the job really ended.

    python bench/eta.py --jobs 20

The emulator runs in its own process (``maple emulator``). A few warm-up jobs first build the
batch history the ETA rests on (not counted). Prints one line per job (rows, shards, the first
p50/p90 in seconds from when it was read, the real finish) and the share of jobs whose first
p90 covered the real finish, and of all readings.
"""

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
from scale import start_emulator


def run_job(root: Path, name: str, rows: int, per_batch: int) -> dict[str, Any]:
    from maple_assets.api.jobs import submit

    source = root / f"{name}.csv"
    pl.DataFrame({"title": [f"{name} item {i}" for i in range(rows)]}).write_csv(source)
    handle = submit(
        str(source),
        prompt="Brand of: {title}",
        model="gpt-4o-mini",
        provider="emulator",
        job=name,
        storage=str(root / "store"),
        output=str(root / f"{name}_out.parquet"),
        max_requests_per_batch=per_batch,
        poll_interval=0.25,
        quiet=True,
    )
    readings: list[tuple[float, float, float]] = []  # when read, p50, p90 (epoch seconds)
    while True:
        status = handle.status()
        eta = status.eta
        now = time.time()
        known = eta.p50_at is not None and eta.p90_at is not None
        if known and (not readings or readings[-1][1:] != (eta.p50_at, eta.p90_at)):
            readings.append((now, eta.p50_at, eta.p90_at))  # type: ignore[arg-type]
        if status != "running":
            break
        time.sleep(0.25)
    handle.wait()
    ended = time.time()
    shards = len(handle.state.manifest() or [])
    return {"name": name, "rows": rows, "shards": shards, "ended": ended, "readings": readings}


def fit_line(root: Path) -> str:
    """The turnaround fit the ETA rests on after the warm-up."""
    from maple_assets.wiring import cost_ledger
    from maple_engine.plan.turnaround import history_fit

    with cost_ledger(str(root / "store")) as costs:
        fit = history_fit(costs, "emulator", "gpt-4o-mini")
        frame = costs.batch_history()
    sizes = frame.select("requests", "duration_s").rows()
    return f"after the warm-up: {fit.describe() if fit else 'no fit'}; batches {sizes}"


def report(jobs: list[dict[str, Any]]) -> None:
    first_hits, all_hits, all_count, errors = 0, 0, 0, []
    print(f"{'job':<8}{'rows':>6}{'shards':>7}{'p50 s':>8}{'p90 s':>8}{'real s':>8}  covered")
    for job in jobs:
        if not job["readings"]:
            print(f"{job['name']:<8}{job['rows']:>6}{job['shards']:>7}  no estimate")
            continue
        at, p50, p90 = job["readings"][0]
        real = job["ended"] - at
        covered = job["ended"] <= p90
        first_hits += covered
        all_hits += sum(job["ended"] <= r[2] for r in job["readings"])
        all_count += len(job["readings"])
        errors.append(abs(job["ended"] - p50))
        print(
            f"{job['name']:<8}{job['rows']:>6}{job['shards']:>7}{p50 - at:>8.1f}{p90 - at:>8.1f}"
            f"{real:>8.1f}  {'yes' if covered else 'NO'}"
        )
    estimated = sum(1 for j in jobs if j["readings"])
    print(f"jobs with an estimate: {estimated}/{len(jobs)}")
    if estimated:
        share = first_hits / estimated
        print(f"first p90 covered the real finish: {first_hits}/{estimated} ({share:.0%})")
        print(
            f"every reading's p90 covered it: {all_hits}/{all_count} ({all_hits / all_count:.0%})"
        )
        print(f"first p50's absolute error: median {statistics.median(errors):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--batch-seconds", type=float, default=1.0)
    parser.add_argument("--per-1k", type=float, default=8.0)
    parser.add_argument("--spread", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    flags = ("--batch-seconds-per-1k", str(args.per_1k), "--batch-seconds-spread", str(args.spread))
    emulator, url = start_emulator(args.batch_seconds, *flags, "--seed", str(args.seed))
    try:
        jobs = run_jobs(url, args.jobs, args.warmup, rng)
    finally:
        emulator.terminate()
        emulator.wait()
    report(jobs)


def run_jobs(url: str, count: int, warmup: int, rng: random.Random) -> list[dict[str, Any]]:
    os.environ["MAPLE_EMULATOR_URL"] = url
    with tempfile.TemporaryDirectory(prefix="maple-eta-") as folder:
        root = Path(folder)
        for i in range(warmup):  # batches of 100 to 1,000 requests
            size = (100, 1000, 300, 600)[i % 4]
            run_job(root, f"warm{i}", 2 * size, size)
        print(fit_line(root))
        return [
            run_job(root, f"job{i}", rng.randint(100, 1200), rng.choice([100, 250, 500, 1000]))
            for i in range(count)
        ]


if __name__ == "__main__":
    main()
