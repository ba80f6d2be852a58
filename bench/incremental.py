"""Incremental rerun benchmark: enrich N rows, edit 1% and append 0.5%, enrich again.

    python bench/incremental.py                 # 1M rows
    python bench/incremental.py --rows 100000

Both runs are the same ``maple enrich`` command on the same ``--job`` against the emulator in its
own process (as in ``bench/scale.py``). Prints the requests each run sent (the rerun must send
exactly the edited + appended rows), wall time and peak RSS of both runs, and the ratio. The
inputs are written by a child process, so the measured runs do not inherit its memory
high-water mark.
"""

import argparse
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import OUT, PROMPT, run_measured, start_emulator

EDIT_EVERY = 100  # 1% of rows edited
APPEND_PER = 200  # 0.5% of rows appended


def catalog(start: int, rows: int) -> pl.DataFrame:
    n = pl.col("n")
    return pl.DataFrame({"n": pl.int_range(start, start + rows, eager=True)}).select(
        pl.format("SKU-{}", n).alias("sku"),
        pl.format("Brand {} organic item {} 500 g", n % 97, n).alias("title"),
        pl.format('Item {}, stored cool and dry; "best" before 2027.', n).alias("description"),
    )


def make_inputs(rows: int, path: str, edited_path: str) -> None:
    """Write the first input and its edited + appended version."""
    first = catalog(0, rows)
    first.write_parquet(path)
    edit = pl.int_range(pl.len()) % EDIT_EVERY == 7
    changed = first.with_columns(
        pl.when(edit).then(pl.col("title") + " (new size)").otherwise(pl.col("title"))
    )
    pl.concat([changed, catalog(rows, rows // APPEND_PER)]).write_parquet(edited_path)


def enrich(source: Path, url: str, work: Path) -> dict[str, object]:
    env = {**os.environ, "MAPLE_EMULATOR_URL": url, "DAGSTER_HOME": str(work / "dagster")}
    args = [
        *(sys.executable, "-m", "maple_assets.cli", "enrich", str(source)),
        *("--prompt", PROMPT, "--model", "gpt-4o-mini", "--provider", "emulator"),
        *("--storage", str(work / "store"), "--output", str(work / "enriched.parquet")),
        *("--poll-interval", "0.1", "--job", "incremental", "--quiet"),
    ]
    before = stats(url)["requests_received"]
    wall, rss, code, cpu = run_measured(args, env)
    if code != 0:
        raise RuntimeError(f"maple enrich exited {code}")
    sent = stats(url)["requests_received"] - before
    return {"wall": wall, "cpu": cpu, "rss": rss, "sent": sent}


def stats(url: str) -> dict[str, int]:
    return dict(orjson.loads(urllib.request.urlopen(f"{url}/_emulator/stats").read()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-seconds", type=float, default=0.2)
    parser.add_argument("--make", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make_inputs(int(args.make[0]), args.make[1], args.make[2])
        return
    work = OUT / "incremental"
    shutil.rmtree(work, ignore_errors=True)
    (work / "dagster").mkdir(parents=True)
    source, edited = work / "catalog.parquet", work / "edited.parquet"
    script = str(Path(__file__).resolve())
    subprocess.run(
        [sys.executable, script, "--make", str(args.rows), str(source), str(edited)], check=True
    )
    expected = len(range(7, args.rows, EDIT_EVERY)) + args.rows // APPEND_PER
    emulator, url = start_emulator(args.batch_seconds)
    try:
        first = enrich(source, url, work)
        shutil.copyfile(edited, source)  # the same input path, now edited and grown
        rerun = enrich(source, url, work)
        twice = stats(url)["bodies_billed_twice"]
    finally:
        emulator.terminate()
        emulator.wait()
    print(f"rows                 {args.rows:,} then {args.rows + args.rows // APPEND_PER:,}")
    print(f"{'':21}{'sent':>10}{'wall s':>10}{'CPU s':>10}{'peak RSS MiB':>14}")
    for name, run in (("first run", first), ("rerun", rerun)):
        row = f"{run['sent']:>10,}{run['wall']:>10.1f}{run['cpu']:>10.1f}{run['rss']:>14}"
        print(f"{name:<21}{row}")
    ok = "OK" if rerun["sent"] == expected else "MISMATCH"
    print(f"expected sent        {expected:,} (edited + appended): {ok}")
    ratio = float(rerun["wall"]) / float(first["wall"])  # type: ignore[arg-type]
    print(f"rerun / first wall   {ratio:.2f}   (target <= 0.20)")
    cpu_ratio = float(rerun["cpu"]) / float(first["cpu"])  # type: ignore[arg-type]
    print(f"rerun / first CPU    {cpu_ratio:.2f}")
    print(f"bodies billed twice  {twice}")


if __name__ == "__main__":
    main()
