"""A server's throughput knee: the best fixed concurrency a sweep finds, beside the adaptive
in-flight bound of ``--provider openai-server`` on the same server.

The emulator stands in for a model server (``maple emulator --server-slots N --latency L``):
it works on at most N answers at once, each L seconds, and queues the rest, so throughput
stops rising at N / L answers per second and more in flight only waits. The sweep sends the
same rows through the real-time lane at each fixed concurrency (bound fixed: first = most);
then the lane runs as a job does (from 8 in flight, up to 64), finding the knee itself.
Prints answers per second of each, the bound the adaptive run ended at, the most requests the
server saw in flight, and whether any request timed out (sent more than once).

    python bench/capacity.py                          # 32 slots, 0.2-0.3 s per answer
    python bench/capacity.py --slots 12 --rows 2000
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realtime import payload, start_emulator

from maple_engine.providers.openai.server import OpenAIServerProvider
from maple_engine.send.lane import RealtimeLane


def run(url: str, rows: int, first: int, most: int) -> dict[str, float]:
    """Send ``rows`` chat rows through the lane; answers per second and the server's counts."""
    provider = OpenAIServerProvider(
        base_url=f"{url}/v1",
        api_key="bench",  # the emulator wants one; a server of your own may not
        checkpoint_root=tempfile.mkdtemp(prefix="maple-bench-"),
        initial_concurrency=first,
        max_concurrency=most,
        model="gpt-4o-mini",
    )
    lane = RealtimeLane(provider)
    work = payload(provider, rows, "gpt-4o-mini")
    httpx.post(f"{url}/_emulator/reset", timeout=10)
    started = time.monotonic()
    sub = lane.submit(work)
    took = time.monotonic() - started
    results = lane.results(sub, lane.poll([sub])[sub.batch_id])
    stats = httpx.get(f"{url}/_emulator/stats", timeout=10).json()
    return {
        "rate": rows / took,
        "ok": float((results["status"] == "succeeded").sum()),
        "sent": float(stats["realtime_requests"]),
        "peak": float(stats["realtime_max_in_flight"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=32, help="answers the server works on")
    parser.add_argument("--latency", default="0.2-0.3", help="seconds per answer, LOW-HIGH")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--sweep", default="8,16,24,32,48,64", help="fixed concurrencies")
    args = parser.parse_args()
    proc, url = start_emulator(
        None, None, 1.0, latency=args.latency, extra=("--server-slots", str(args.slots))
    )
    try:
        sweep = {}
        for level in (int(x) for x in args.sweep.split(",")):
            sweep[level] = run(url, args.rows, level, level)
            print(
                f"fixed {level:>3} in flight   {sweep[level]['rate']:7.1f} answers/s   "
                f"sent {sweep[level]['sent']:.0f}  server peak {sweep[level]['peak']:.0f}",
                flush=True,
            )
        adaptive = run(url, args.rows, 8, 64)
    finally:
        proc.terminate()
        proc.wait()
    best = max(sweep, key=lambda level: sweep[level]["rate"])
    low, high = (float(x) for x in args.latency.split("-"))
    print(
        f"knee (the server)   {args.slots / ((low + high) / 2):7.1f} answers/s "
        f"({args.slots} slots at {args.latency} s)"
    )
    print(f"best fixed          {sweep[best]['rate']:7.1f} answers/s at {best} in flight")
    print(
        f"adaptive (8..64)    {adaptive['rate']:7.1f} answers/s = "
        f"{adaptive['rate'] / sweep[best]['rate']:.1%} of the best fixed; server peak "
        f"{adaptive['peak']:.0f} in flight; {adaptive['ok']:.0f}/{args.rows} answered, "
        f"{adaptive['sent'] - args.rows:.0f} sent again (timeouts, retries)"
    )


if __name__ == "__main__":
    main()
