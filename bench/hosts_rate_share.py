"""One real-time rate limit shared by runs on several hosts, against the emulator.

N simulated hosts (each its own UTS namespace and host name, tests/hosts/harness.py) each run
``maple enrich --provider openai-realtime`` on their own job, all on one account and model, over
one storage root; the emulator (a separate process, ``maple emulator --rpm``) enforces one limit
over per-second windows. Senders share it through heartbeats under the storage root
(``maple_engine.providers.realtime.rate_shares``). Prints, for each N: the requests served as a
share of the limit from the first request to the last (start-up of the later hosts and the tail
after the first host finishes included), the same over the steady middle (all hosts sending),
and the 429s. Needs root (``unshare --uts``).

    python bench/hosts_rate_share.py                    # 2 and 3 hosts at 2,400 RPM
    python bench/hosts_rate_share.py --hosts 3 --rpm 1200 --rows 400
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import polars as pl

REPO = Path(__file__).parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from realtime import start_emulator  # noqa: E402  (bench/realtime.py)

from tests.hosts.harness import BIN, hosts  # noqa: E402


class Counter(threading.Thread):
    """(time, realtime requests, 429s, billed) from the emulator every 0.1 s."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop = url, threading.Event()
        self.samples: list[tuple[float, int, int, int]] = []

    def run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.stop.wait(0.1):
                s = http.get(f"{self.url}/_emulator/stats").json()
                self.samples.append(
                    (time.time(), s["realtime_requests"], s["realtime_429"], s["requests_billed"])
                )


def run(n: int, rpm: int, rows: int, work: Path) -> None:
    emulator, url = start_emulator(rpm, None, 1.0)
    counter = Counter(url)
    counter.start()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_BASE_URL": f"{url}/v1",
           "OPENAI_API_KEY": "one-account", "DAGSTER_HOME": ""}  # fmt: skip
    names = [f"host-{i}" for i in range(n)]
    try:
        with hosts(work, env, *names) as machines:
            procs = []
            for i, host in enumerate(machines):
                table = host.home / "in.parquet"
                pl.DataFrame(
                    {"title": [f"{host.name} item {j}" for j in range(rows)]}
                ).write_parquet(table)
                argv = [
                    str(BIN / "maple"), "enrich", str(table), "--prompt", "Brand of {title}",
                    "--model", "gpt-4o-mini", "--provider", "openai-realtime",
                    "--storage", str(work / "store"), "--job", f"job{i}",
                    "--output", str(host.home / "out.parquet"), "--quiet",
                ]  # fmt: skip
                procs.append(host.start(argv, log="enrich", DAGSTER_HOME=str(host.home / "dg")))
            for host, proc in zip(machines, procs, strict=True):
                if proc.wait(timeout=1800) != 0:
                    raise SystemExit(f"{host.name} failed:\n{host.log('enrich')[-3000:]}")
    finally:
        time.sleep(0.3)
        counter.stop.set()
        counter.join()
        emulator.terminate()
        emulator.wait()
    report(n, rpm, rows, counter.samples)


def report(n: int, rpm: int, rows: int, samples: list[tuple[float, int, int, int]]) -> None:
    total = n * rows
    first = next(t for t, sent, _, _ in samples if sent > 0)
    last = next(t for t, _, _, billed in samples if billed >= total)
    _, sent, refused, billed = samples[-1]
    share = billed / (rpm / 60 * (last - first))
    middle = [s for s in samples if first + 10 <= s[0] and s[3] <= 0.8 * total]
    steady = float("nan")
    if len(middle) >= 2:
        (t0, _, _, b0), (t1, _, _, b1) = middle[0], middle[-1]
        steady = (b1 - b0) / (rpm / 60 * (t1 - t0))
    print(
        f"{n} hosts x {rows} rows at {rpm} RPM: {billed} billed in {last - first:.1f} s = "
        f"{share:.1%} of the limit first to last request, {steady:.1%} steady; "
        f"{refused} 429s ({refused / max(sent, 1):.2%} of {sent} requests)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=[2, 3])
    parser.add_argument("--rpm", type=int, default=2400)
    parser.add_argument("--rows", type=int, default=0, help="rows per host (default: 45 s)")
    args = parser.parse_args()
    for n in args.hosts:
        rows = args.rows or int(args.rpm / 60 * 45 / n)
        with tempfile.TemporaryDirectory(prefix="maple-hosts-") as work:
            run(n, args.rpm, rows, Path(work))


if __name__ == "__main__":
    main()
