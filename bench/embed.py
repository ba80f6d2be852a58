"""Embedding benchmark: N rows through ``maple embed`` at D dimensions against the emulator.

    python bench/embed.py                              # 1M rows, 256 dimensions
    python bench/embed.py --rows 100000 --dimensions 1536

The input is written by an earlier process (``bench/scale.py``'s catalog), and the emulator runs
in its own process, so the peak RSS printed is ``maple embed``'s alone (its ``ru_maxrss``, what
``/usr/bin/time -v`` reports as "Maximum resident set size"). The output holds N x D float32
values; the run must stay bounded by a few shards, not the table. Prints wall, CPU, peak RSS,
rows/s, the output's size and type, and the emulator's billing counters.
"""

import argparse
import os
import shutil
import sys
import urllib.request
from pathlib import Path

import orjson
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import OUT, load, make_input, process_cpu, run_measured, start_emulator

MODEL = "text-embedding-3-small"


def run_embed(source: Path, url: str, dimensions: int, poll: float) -> dict[str, object]:
    work = OUT / "embed"
    shutil.rmtree(work, ignore_errors=True)
    (work / "dagster").mkdir(parents=True)
    env = {**os.environ, "MAPLE_EMULATOR_URL": url, "DAGSTER_HOME": str(work / "dagster")}
    output = work / "vectors.parquet"
    args = [
        sys.executable, "-m", "maple_assets.cli", "embed", str(source),
        "--text", "{title}", "--model", MODEL, "--dimensions", str(dimensions),
        "--provider", "emulator", "--storage", str(work / "store"), "--output", str(output),
        "--job", "bench-embed", "--poll-interval", str(poll), "--quiet",
        "--max-enqueued-tokens", "1000000000", "--timings-json", str(work / "timings.json"),
    ]  # fmt: skip
    wall, rss, code, cpu = run_measured(args, env)
    if code != 0:
        raise RuntimeError(f"maple embed exited {code}")
    meta = pq.read_metadata(output)
    field = pq.read_schema(output).field("llm_embedding")
    return {
        **orjson.loads((work / "timings.json").read_bytes()),
        "wall": wall,
        "rss_mib": rss,
        "cpu": cpu,
        "rows": meta.num_rows,
        "type": str(field.type),
        "bytes": output.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--batch-seconds", type=float, default=0.5)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    source = make_input(args.rows)
    emulator, url = start_emulator(args.batch_seconds)
    try:
        got = run_embed(source, url, args.dimensions, max(0.1, args.batch_seconds / 4))
        stats = orjson.loads(urllib.request.urlopen(f"{url}/_emulator/stats").read())
        emulator_cpu = process_cpu(emulator.pid)
    finally:
        emulator.terminate()
        emulator.wait()
    wall = float(got["wall"])  # type: ignore[arg-type]
    vectors_mib = args.rows * args.dimensions * 4 / 2**20
    print(f"rows                 {args.rows:,} x {args.dimensions} dimensions")
    print(f"vectors              {vectors_mib:,.0f} MiB of float32 ({got['type']})")
    print(f"maple embed wall     {wall:8.1f} s   ({args.rows / wall:,.0f} rows/s)")
    print(f"maple embed CPU      {got['cpu']:8.1f} s   (user + system; load {load()})")
    print(f"peak RSS             {got['rss_mib']} MiB")
    print(f"  high-water mark after each stage, MiB: {got['peak_rss_mib']}")
    print(f"output               {got['rows']:,} rows, {int(got['bytes']) / 2**20:,.0f} MiB")  # type: ignore[call-overload]
    print(
        f"emulator             batches {stats['batches_created']}, billed "
        f"{stats['requests_billed']:,}, billed twice {stats['bodies_billed_twice']}, "
        f"CPU {emulator_cpu:.1f} s (its own process, sharing the cores)"
    )


if __name__ == "__main__":
    main()
