"""Scale benchmark: N rows through ``maple enrich`` against the emulator, and a floor script.

    python bench/scale.py                 # 1M rows
    python bench/scale.py --rows 100000   # the 100k benchmark
    python bench/scale.py --rows 10000000 --batch-seconds 1

The emulator runs as its own process (``maple emulator``), as a provider would, so "platform
time" is the wall time of ``maple enrich`` alone. The floor does the same data work in one
process with no orchestration, storage, HTTP or retries: read, render, encode the JSONL, decode
reply lines, join them back, write Parquet. Prints rows/s, wall time per stage, peak RSS, and
the ratio to the floor.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson

from maple_assets.api.dagster_home import DAGSTER_YAML

OUT = Path(__file__).resolve().parent / "out"
PROMPT = "Extract the brand and the size from: {title} / {description}"


def make_input(rows: int) -> Path:
    """The catalog of ``rows`` rows, written by a child process if it is not there yet: a
    command started from this process would report this process's memory high-water mark as
    its own (Linux keeps it across fork and exec; 10M rows made here showed 2 GB)."""
    path = OUT / f"catalog_{rows}.parquet"
    if not path.exists():
        subprocess.run([sys.executable, "-c", WRITE_CATALOG, str(rows), str(path)], check=True)
    return path


WRITE_CATALOG = """
import sys
import polars as pl
rows, path = int(sys.argv[1]), sys.argv[2]
n = pl.col("n")
pl.DataFrame({"n": pl.int_range(rows, eager=True)}).select(
    pl.format("SKU-{}", n).alias("sku"),
    pl.format("Brand {} organic item {} 500 g", n % 97, n).alias("title"),
    pl.format('Item {}, stored cool and dry; "best" before 2027.', n).alias("description"),
    ((n % 2000).cast(pl.Float64) / 100).alias("price"),
).write_parquet(path)
"""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_emulator(batch_seconds: float, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    """``maple emulator`` in its own process (``flags``: more of its options), and its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "maple_assets.cli",
            "emulator",
            "--port",
            str(port),
            "--batch-seconds",
            str(batch_seconds),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/_emulator/stats", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the emulator did not start")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds a running process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_measured(args: list[str], env: dict[str, str]) -> tuple[float, int, int, float]:
    """(wall seconds, peak RSS in MiB, exit code, CPU seconds) of one child process.

    Generate the input in an earlier process (``make_input`` runs before anything large is
    loaded here): a child inherits its parent's RSS high-water mark across fork."""
    started = time.monotonic()
    proc = subprocess.Popen(args, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    wall = time.monotonic() - started
    return wall, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status), cpu


def dagster_own_storage(home: Path) -> str:
    """A dagster.yaml that configures Dagster's own SQLite storages (the CLI then opens the home
    as configured, not with its pooled engines), on the same files."""
    history = home / "history"
    return DAGSTER_YAML + (
        "run_storage:\n  module: dagster._core.storage.runs\n  class: SqliteRunStorage\n"
        f"  config:\n    base_dir: {history}\n"
        "event_log_storage:\n  module: dagster._core.storage.event_log\n"
        f"  class: SqliteEventLogStorage\n  config:\n    base_dir: {history / 'runs'}\n"
    )


def run_platform(
    source: Path,
    url: str,
    batch_seconds: float,
    max_enqueued: int | None = None,
    storage: str = "pooled",
) -> dict[str, object]:
    work = OUT / "platform"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    timings = work / "timings.json"
    env = {**os.environ, "MAPLE_EMULATOR_URL": url, "DAGSTER_HOME": str(work / "dagster")}
    (work / "dagster").mkdir()
    if storage == "dagster":
        (work / "dagster" / "dagster.yaml").write_text(dagster_own_storage(work / "dagster"))
    args = [
        sys.executable,
        "-m",
        "maple_assets.cli",
        "enrich",
        str(source),
        "--prompt",
        PROMPT,
        "--model",
        "gpt-4o-mini",
        "--provider",
        "emulator",
        "--storage",
        str(work / "store"),
        "--output",
        str(work / "enriched.parquet"),
        "--poll-interval",
        str(max(0.1, batch_seconds / 4)),
        "--job",
        "bench",
        "--quiet",
        "--timings-json",
        str(timings),
        *(["--max-enqueued-tokens", str(max_enqueued)] if max_enqueued else []),
    ]
    wall, rss, code, cpu = run_measured(args, env)
    if code != 0:
        raise RuntimeError(f"maple enrich exited {code}")
    data = orjson.loads(timings.read_bytes())
    return {"wall": wall, "rss_mib": rss, "cpu": cpu, **data}


def run_floor(source: Path) -> dict[str, object]:
    out = OUT / "floor.parquet"
    figures = OUT / "floor.json"
    script = str(Path(__file__).with_name("floor.py"))
    wall, rss, code, cpu = run_measured(
        [sys.executable, script, str(source), str(out), PROMPT, "--json", str(figures)],
        dict(os.environ),
    )
    if code != 0:
        raise RuntimeError("floor script failed")
    return {
        "wall": wall,
        "rss_mib": rss,
        "cpu": cpu,
        "stages_cpu": orjson.loads(figures.read_bytes()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-seconds", type=float, default=0.5)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument(
        "--max-enqueued-tokens",
        type=int,
        default=None,
        help="the provider queue's limit; unset, the job probes it one validated batch at a time",
    )
    parser.add_argument(
        "--dagster-storage",
        choices=["pooled", "dagster"],
        default="pooled",
        help="the CLI's pooled SQLite storages (its default), or Dagster's own on the same files",
    )
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    source = make_input(args.rows)
    emulator, url = start_emulator(args.batch_seconds)
    try:
        platform = run_platform(
            source, url, args.batch_seconds, args.max_enqueued_tokens, args.dagster_storage
        )
        stats = orjson.loads(urllib.request.urlopen(f"{url}/_emulator/stats").read())
        emulator_cpu = process_cpu(emulator.pid)
    finally:
        emulator.terminate()
        emulator.wait()
    floor = None if args.no_floor else run_floor(source)
    wall = float(platform["wall"])  # type: ignore[arg-type]
    print(f"rows                 {args.rows:,}")
    print(f"maple enrich wall    {wall:8.1f} s   ({args.rows / wall:,.0f} rows/s)")
    print(f"maple enrich CPU     {platform['cpu']:8.1f} s   (user + system; load {load()})")
    print(f"peak RSS             {platform['rss_mib']} MiB")
    print(f"  high-water mark after each stage, MiB: {platform['peak_rss_mib']}")
    print(f"dagster runs         {platform['runs']}   sensor ticks {platform['ticks']}")
    stages_cpu: dict[str, float] = platform.get("stages_cpu", {})  # type: ignore[assignment]
    floor_cpu: dict[str, float] = floor["stages_cpu"] if floor else {}  # type: ignore[assignment]
    stages: dict[str, float] = platform["stages"]  # type: ignore[assignment]
    print("  stage                  wall       CPU   floor CPU   ratio")
    for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1]):
        cpu = stages_cpu.get(stage, 0.0)
        least = floor_cpu.get(stage)
        against = f"{least:7.1f} s {cpu / least:6.1f}x" if least else ""
        print(f"  {stage:<18} {seconds:8.1f} s {cpu:7.1f} s   {against}")
    if "cpu_total" in platform:
        rest = float(platform["cpu_total"]) - sum(stages_cpu.values())  # type: ignore[arg-type]
        print(f"  {'start-up and rest':<18} {'':8}   {rest:7.1f} s")
    print(
        f"emulator             batches {stats['batches_created']}, billed "
        f"{stats['requests_billed']:,}, billed twice {stats['bodies_billed_twice']}, "
        f"CPU {emulator_cpu:.1f} s (its own process, sharing the cores)"
    )
    if floor is not None:
        least = sum(floor_cpu.values())
        print(
            f"floor                CPU of its stages {least:.1f} s (process {floor['cpu']:.1f} s, "
            f"with the replies it builds untimed)   peak RSS {floor['rss_mib']} MiB"
        )
        print(f"CPU ratio to floor   {float(platform['cpu']) / least:8.2f}x")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
