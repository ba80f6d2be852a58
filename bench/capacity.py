"""A server's throughput knee: the best fixed concurrency a sweep finds, beside the adaptive
in-flight bound of ``--provider openai-server`` on the same server.

The emulator stands in for a model server (``maple emulator --server-slots N --latency L``):
it works on at most N answers at once, each L seconds, and queues the rest, so throughput
stops rising at N / L answers per second and more in flight only waits. The sweep sends the
same rows through the real-time lane at each fixed concurrency (bound fixed: first = most);
then the lane runs as a job does (from 8 in flight, up to 64), finding the knee itself.
Prints answers per second of each, the bound the adaptive run ended at, the most requests the
server saw in flight, and whether any request timed out (sent more than once).

With ``--server URL --model M`` the same sweep and adaptive run go to a real OpenAI-compatible
server (llama.cpp's, vLLM's, ...) instead, each answer capped at ``--max-tokens``; it prints the
model's output tokens per second beside answers per second (no server counts there: a real
server keeps none).

    python bench/capacity.py                          # 32 slots, 0.2-0.3 s per answer
    python bench/capacity.py --slots 12 --rows 2000
    python bench/capacity.py --server http://127.0.0.1:8000/v1 --model gemma-3-270m \\
        --rows 60 --sweep 1,2,4,8
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realtime import payload, start_emulator

from maple_engine.providers.openai.server import OpenAIServerProvider
from maple_engine.send.lane import RealtimeLane


def run(
    base: str, rows: int, first: int, most: int, model: str = "gpt-4o-mini", **params: Any
) -> dict[str, float]:
    """Send ``rows`` chat rows through the lane to the server at ``base`` (``.../v1``): answers
    and output tokens per second, and the emulator's counts where ``base`` is the emulator."""
    provider = OpenAIServerProvider(
        base_url=base,
        api_key="bench",  # the emulator wants one; a server of your own may not
        checkpoint_root=tempfile.mkdtemp(prefix="maple-bench-"),
        initial_concurrency=first,
        max_concurrency=most,
        model=model,
    )
    lane = RealtimeLane(provider)
    work = payload(provider, rows, model, **params)
    emulator = None if params else base.removesuffix("/v1")
    if emulator is not None:
        httpx.post(f"{emulator}/_emulator/reset", timeout=10)
    started = time.monotonic()
    sub = lane.submit(work)
    took = time.monotonic() - started
    results = lane.results(sub, lane.poll([sub])[sub.batch_id])
    figures = {
        "rate": rows / took,
        "tokens": float(results["output_tokens"].sum()) / took,
        "ok": float((results["status"] == "succeeded").sum()),
        "sent": float(rows + (results["sends"].fill_null(1) - 1).sum()),
        "peak": float("nan"),
    }
    if emulator is not None:
        stats = httpx.get(f"{emulator}/_emulator/stats", timeout=10).json()
        figures["sent"] = float(stats["realtime_requests"])
        figures["peak"] = float(stats["realtime_max_in_flight"])
    return figures


def sweep_and_adapt(args: argparse.Namespace, base: str, **params: Any) -> None:
    """The sweep at each fixed bound, then the adaptive run (8..64), printed."""
    sweep = {}
    for level in (int(x) for x in args.sweep.split(",")):
        sweep[level] = run(base, args.rows, level, level, args.model, **params)
        print(
            f"fixed {level:>3} in flight   {sweep[level]['rate']:7.2f} answers/s  "
            f"{sweep[level]['tokens']:7.1f} tokens/s   sent {sweep[level]['sent']:.0f}  "
            f"server peak {sweep[level]['peak']:.0f}",
            flush=True,
        )
    adaptive = run(base, args.rows, 8, 64, args.model, **params)
    best = max(sweep, key=lambda level: sweep[level]["rate"])
    print(
        f"best fixed          {sweep[best]['rate']:7.2f} answers/s "
        f"({sweep[best]['tokens']:.1f} output tokens/s) at {best} in flight"
    )
    print(
        f"adaptive (8..64)    {adaptive['rate']:7.2f} answers/s = "
        f"{adaptive['rate'] / sweep[best]['rate']:.1%} of the best fixed "
        f"({adaptive['tokens']:.1f} output tokens/s); server peak {adaptive['peak']:.0f} in "
        f"flight; {adaptive['ok']:.0f}/{args.rows} answered, "
        f"{adaptive['sent'] - args.rows:.0f} sent again (timeouts, retries)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=32, help="answers the server works on")
    parser.add_argument("--latency", default="0.2-0.3", help="seconds per answer, LOW-HIGH")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--sweep", default="8,16,24,32,48,64", help="fixed concurrencies")
    parser.add_argument("--server", help="a real server's API (.../v1) instead of the emulator")
    parser.add_argument("--model", default="gpt-4o-mini", help="the model the server serves")
    parser.add_argument("--max-tokens", type=int, default=32, help="per answer (--server)")
    args = parser.parse_args()
    if args.server:
        sweep_and_adapt(args, args.server, max_tokens=args.max_tokens, temperature=0)
        return
    proc, url = start_emulator(
        None, None, 1.0, latency=args.latency, extra=("--server-slots", str(args.slots))
    )
    try:
        low, high = (float(x) for x in args.latency.split("-"))
        print(
            f"knee (the server)   {args.slots / ((low + high) / 2):7.1f} answers/s "
            f"({args.slots} slots at {args.latency} s)"
        )
        sweep_and_adapt(args, f"{url}/v1")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
