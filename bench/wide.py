"""A wide table: a few rows of many columns through ``maple enrich`` against the emulator, to
see that the time per stage grows with the columns, not with their square.

    python bench/wide.py                     # 5 rows of 2,000 and of 10,000 columns
    python bench/wide.py --columns 500,20000

The inputs are written by this process before ``maple enrich`` starts in its own; prints each
run's wall and CPU per stage (``--timings-json``).
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl

OUT = Path(__file__).resolve().parent / "out" / "wide"


def run(columns: int, rows: int) -> dict[str, object]:
    work = OUT / f"c{columns}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "wide.parquet"
    frame = pl.DataFrame({f"c{i}": ["v"] * rows for i in range(columns)})
    frame.with_columns(pl.Series("title", [f"t{i}" for i in range(rows)])).write_parquet(source)
    timings = work / "timings.json"
    args = [
        sys.executable, "-m", "maple_assets.cli", "enrich", str(source), "--prompt",
        "About {title}", "--model", "gpt-4o-mini", "--provider", "emulator", "--storage",
        str(work / "store"), "--output", str(work / "out.parquet"), "--quiet",
        "--poll-interval", "0.1", "--timings-json", str(timings),
    ]  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(work / "dagster")}
    (work / "dagster").mkdir()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return dict(orjson.loads(timings.read_bytes()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", default="2000,10000")
    parser.add_argument("--rows", type=int, default=5)
    args = parser.parse_args()
    for columns in (int(c) for c in args.columns.split(",")):
        timings = run(columns, args.rows)
        stages, cpu = timings["stages"], timings["stages_cpu"]
        assert isinstance(stages, dict) and isinstance(cpu, dict)
        line = "  ".join(f"{k} {stages[k]:.1f}s/{cpu.get(k, 0):.1f}s" for k in stages)
        print(f"{columns:>6,} columns x {args.rows} rows  wall/CPU per stage: {line}")


if __name__ == "__main__":
    main()
