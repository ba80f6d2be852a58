"""Real-time provider throughput at the rate limit, against the emulator.

Starts the emulator in a separate process (``maple emulator --rpm/--tpm --burst-seconds``) so
that server and client do not share a GIL, runs a few thousand rows through the real-time
provider without telling it the limits (it learns them from the headers), and prints:

- the achieved rate as a share of the limit over the whole run and in steady state (from 5 s
  after the first request to the last 5%, read from the emulator's counters);
- 429s in all and in steady state, and rows billed twice;
- the client's CPU per request beyond start-up (this process's user + system time while it
  sends, less the thread that reads the emulator's counters; aiohttp is imported before);
- start-up: ``maple enrich --provider openai-realtime`` from launch to its first request;
- with ``--whole-run``: ``maple enrich`` itself through the whole job, the share of the limit
  from the command's launch (start-up included) and from its first request, and its CPU.

    python bench/realtime.py                       # per-second windows, then a full minute
    python bench/realtime.py --burst-seconds 2 --rows 5000
    python bench/realtime.py --whole-run --rpm 2700 --burst-seconds 2 --latency 0.2-0.5
    python bench/realtime.py --provider anthropic-realtime
    python bench/realtime.py --bare                # and a bare aiohttp client, for the floor
"""

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from maple_engine.providers.anthropic.realtime import AnthropicRealtimeProvider
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import RealtimeProvider
from maple_engine.send.lane import RealtimeLane

WARM_S = 5.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_emulator(
    rpm: int | None,
    tpm: int | None,
    burst: float,
    batch_seconds: float = 2.0,
    latency: str = "0",
    *,
    limiter: str = "window",
    extra: tuple[str, ...] = (),
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "maple_assets.cli", "emulator", "--port", str(port)]
    cmd += ["--rpm", str(rpm)] if rpm else []
    cmd += ["--tpm", str(tpm)] if tpm else []
    cmd += ["--burst-seconds", str(burst), "--batch-seconds", str(batch_seconds)]
    cmd += ["--latency", latency, "--limiter", limiter, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/_emulator/stats", timeout=1).raise_for_status()
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the emulator did not start")


def payload(provider: RealtimeProvider, rows: int, model: str, **params: Any) -> ShardPayload:
    spec = RequestSpec(model, system="Extract the brand.", params=params)
    frame = pl.DataFrame(
        {"t": [f"Maple Farm product {i}, pack of {i % 12 + 1}" for i in range(rows)]}
    )
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("bench", "s00000", 1, model, requests)


class Sampler(threading.Thread):
    """Reads the emulator's counters every 0.5 s: (time, billed, 429s); ``cpu`` is its own."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.stop = url, list[tuple[float, int, int]](), threading.Event()
        self.cpu = 0.0

    def run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.stop.wait(0.5):
                stats = http.get(f"{self.url}/_emulator/stats").json()
                self.samples.append(
                    (time.monotonic(), stats["requests_billed"], stats["realtime_429"])
                )
        self.cpu = time.thread_time()  # this thread's CPU, not the client's

    def steady(self, rows: int) -> tuple[float, int]:
        """Requests per second and 429s from WARM_S after the first request to 95% done."""
        first = next(t for t, billed, _ in self.samples if billed > 0)
        window = [s for s in self.samples if s[0] >= first + WARM_S and s[1] <= 0.95 * rows]
        if len(window) < 2:
            return float("nan"), -1
        (t0, b0, e0), (t1, b1, e1) = window[0], window[-1]
        return (b1 - b0) / (t1 - t0), e1 - e0


def send_rows(args: argparse.Namespace, url: str) -> dict[str, float]:
    """The client's side of a case: ``args.rows`` rows through the real-time lane (pacing,
    checkpoints, retries) against the emulator at ``url``; its wall minutes, CPU (this
    process's user + system while it sends, aiohttp imported before), rows ok, tokens."""
    import aiohttp  # noqa: F401  (its import, ~0.4 s of CPU, is start-up: measured apart)

    os.environ.update(OPENAI_API_KEY="bench", ANTHROPIC_API_KEY="bench")
    root = tempfile.mkdtemp(prefix="maple-bench-")
    provider: RealtimeProvider
    if args.provider == "anthropic-realtime":
        provider = AnthropicRealtimeProvider(base_url=url, api_key="bench", checkpoint_root=root)
        model = "claude-haiku-4-5"
    else:
        provider = OpenAIRealtimeProvider(
            base_url=f"{url}/v1", api_key="bench", checkpoint_root=root
        )
        model = "gpt-4o-mini"
    work = payload(provider, args.rows, model)
    cpu0, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    lane = RealtimeLane(provider)  # the job's sender: pacing, checkpoints, retries
    sub = lane.submit(work)
    cpu1, minutes = resource.getrusage(resource.RUSAGE_SELF), (time.monotonic() - started) / 60
    results = lane.results(sub, lane.poll([sub])[sub.batch_id])
    shutil.rmtree(root, ignore_errors=True)
    return {
        "minutes": minutes,
        "cpu": cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime,
        "ok": int((results["status"] == "succeeded").sum()),
        "tokens": int(results["input_tokens"].sum() + results["output_tokens"].sum()),
    }


def client_elsewhere(args: argparse.Namespace, url: str) -> dict[str, float]:
    """``send_rows`` in a child process importing ``args.client_checkout``'s engine."""
    env = dict(os.environ, PYTHONPATH=args.client_checkout)
    cmd = [sys.executable, __file__, "--client-of", url, "--rows", str(args.rows)]
    out = subprocess.run(
        [*cmd, "--provider", args.provider], env=env, check=True, capture_output=True
    )
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


def case(args: argparse.Namespace, name: str, rpm: int | None, tpm: int | None) -> None:
    proc, url = start_emulator(
        rpm, tpm, args.burst_seconds, latency=args.latency, limiter=args.limiter
    )
    try:
        sampler = Sampler(url)
        sampler.start()
        sent = client_elsewhere(args, url) if args.client_checkout else send_rows(args, url)
        sampler.stop.set()
        sampler.join()
        stats = httpx.get(f"{url}/_emulator/stats", timeout=10).json()
    finally:
        proc.terminate()
        proc.wait()
    rows, minutes = args.rows, sent["minutes"]
    cpu = sent["cpu"] - (0.0 if args.client_checkout else sampler.cpu)
    rate, steady_429 = sampler.steady(rows)
    if rpm and not tpm:
        share, steady = rows / minutes / rpm, rate * 60 / rpm
    else:  # tokens per request are uniform enough here to convert the steady request rate
        tpm = tpm or 1
        share, steady = sent["tokens"] / minutes / tpm, rate * 60 * sent["tokens"] / rows / tpm
    client = f" client {args.client_checkout}" if args.client_checkout else ""
    print(
        f"{name:<9} {args.provider} {args.limiter} S={args.burst_seconds:g}s rows {rows} "
        f"ok {sent['ok']}  {minutes * 60:5.1f}s  share {share:6.1%}  steady {steady:6.2%}  "
        f"429s {stats['realtime_429']} (steady {steady_429})  "
        f"billed twice {stats['bodies_billed_twice']}  CPU/request {cpu / rows * 1000:.2f} ms"
        f"  load {os.getloadavg()[0]:.1f}{client}",
        flush=True,
    )


def bare(args: argparse.Namespace, together: int) -> None:
    """The floor: a bare aiohttp client sending the same bodies at the limit's pace (told, not
    learned), ``together`` requests per event-loop wake, no retries, checkpoints or parsing
    beyond orjson."""
    import asyncio

    import aiohttp
    import orjson

    rate = args.rpm / 60
    proc, url = start_emulator(None, None, 1.0)
    body = orjson.dumps(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Maple Farm product 1"}]}
    )

    async def send_all() -> None:
        connector = aiohttp.TCPConnector(limit=64)
        async with aiohttp.ClientSession(connector=connector) as client:

            async def one() -> None:
                async with client.post(f"{url}/v1/chat/completions", data=body) as answer:
                    orjson.loads(await answer.read())

            tasks, started = [], time.monotonic()
            for i in range(args.rows):
                wait = started + (i // together) * together / rate - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                tasks.append(asyncio.create_task(one()))
            await asyncio.gather(*tasks)

    try:
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        asyncio.run(send_all())
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(
        f"bare      aiohttp, {rate:.0f}/s, {together} per wake: rows {args.rows}  {wall:5.1f}s  "
        f"CPU/request {cpu / args.rows * 1000:.2f} ms",
        flush=True,
    )


def startup(args: argparse.Namespace) -> None:
    """Seconds from launching ``maple enrich`` to the emulator's first real-time request."""
    proc, url = start_emulator(None, None, 1.0)
    tmp = Path(tempfile.mkdtemp(prefix="maple-bench-"))
    pl.DataFrame({"title": [f"item {i}" for i in range(20)]}).write_parquet(tmp / "in.parquet")
    env = dict(os.environ, OPENAI_API_KEY="bench", OPENAI_BASE_URL=f"{url}/v1")
    cmd = [
        *(sys.executable, "-m", "maple_assets.cli", "enrich", str(tmp / "in.parquet")),
        *("--prompt", "{title}", "--model", "gpt-4o-mini", "--provider", "openai-realtime"),
        *("--storage", str(tmp / "store"), "--output", str(tmp / "out.parquet"), "--quiet"),
    ]
    try:
        with httpx.Client(timeout=5) as http:
            started = time.monotonic()
            child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
            while http.get(f"{url}/_emulator/stats").json()["realtime_requests"] == 0:
                if child.poll() is not None:
                    raise RuntimeError(f"maple enrich exited with {child.returncode}")
                time.sleep(0.01)
            first = time.monotonic() - started
            child.wait()
            total = time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait()
    print(
        f"start-up  maple enrich --provider openai-realtime: first request after {first:.2f}s "
        f"(20 rows done in {total:.2f}s)",
        flush=True,
    )


def whole_run(args: argparse.Namespace) -> None:
    """``maple enrich`` through a whole real-time job at an undisclosed RPM limit: the share of
    the limit from the command's launch (start-up included) and from its first request to the
    last request admitted, read from the emulator's counters every 10 ms; 429s; the command's
    CPU (user + system, start-up and Dagster runs included) per row."""
    rate = args.rpm / 60
    proc, url = start_emulator(
        args.rpm, None, args.burst_seconds, latency=args.latency, limiter=args.limiter
    )
    tmp = Path(tempfile.mkdtemp(prefix="maple-bench-"))
    titles = [f"Maple Farm product {i}, pack of {i % 12 + 1}" for i in range(args.rows)]
    pl.DataFrame({"title": titles}).write_parquet(tmp / "in.parquet")
    env = dict(os.environ, OPENAI_API_KEY="bench", OPENAI_BASE_URL=f"{url}/v1")
    if args.client_checkout:  # another checkout's maple enrich (before/after a change)
        env["PYTHONPATH"] = args.client_checkout
    cmd = [
        *(sys.executable, "-m", "maple_assets.cli", "enrich", str(tmp / "in.parquet")),
        *("--prompt", "Extract the brand: {title}", "--model", "gpt-4o-mini"),
        *("--provider", "openai-realtime", "--storage", str(tmp / "store")),
        *("--output", str(tmp / "out.parquet"), "--quiet"),
    ]
    try:
        with httpx.Client(timeout=5) as http:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            child = subprocess.Popen(
                cmd, env=env, stdout=subprocess.DEVNULL, cwd=args.client_checkout
            )
            first = done = None
            seen: list[tuple[float, int]] = []
            refused: list[float] = []  # when each 429 was first seen, from launch
            while done is None:
                stats = http.get(f"{url}/_emulator/stats").json()
                admitted = stats["realtime_requests"] - stats["realtime_429"]
                now = time.monotonic() - started
                seen.append((now, admitted))
                refused += [now] * (stats["realtime_429"] - len(refused))
                first = now if first is None and stats["realtime_requests"] else first
                done = now if admitted >= args.rows else None
                if child.poll() is not None and done is None:
                    raise RuntimeError(f"maple enrich exited with {child.returncode}")
                time.sleep(0.01)
            child.wait()
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            stats = http.get(f"{url}/_emulator/stats").json()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert first is not None
    if args.timeline:  # requests admitted in each second from launch
        per = [max((n for t, n in seen if t < s + 1), default=0) for s in range(int(done) + 1)]
        print("admitted per second:", [b - a for a, b in zip([0, *per], per, strict=False)])
    print(
        f"whole run maple enrich openai-realtime {args.limiter} S={args.burst_seconds:g}s latency "
        f"{args.latency}s rows {args.rows} at {args.rpm} RPM: first request {first:.2f}s, last "
        f"admitted {done:.2f}s, exit {wall:.2f}s; share of the limit from launch "
        f"{args.rows / (done * rate):6.2%}, from the first request "
        f"{args.rows / ((done - first) * rate):6.2%}; 429s {stats['realtime_429']} "
        f"(at {', '.join(f'{t:.2f}s' for t in refused) or '-'}); billed "
        f"twice {stats['bodies_billed_twice']}; CPU {cpu:.2f}s ({cpu / args.rows * 1000:.2f} "
        f"ms/row, start-up and Dagster runs included)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--provider", default="openai-realtime")
    parser.add_argument("--rpm", type=int, default=3000)
    parser.add_argument("--tpm", type=int, default=120_000)
    parser.add_argument(
        "--burst-seconds", type=float, default=None, help="Window length (default: 1, then 60)."
    )
    parser.add_argument(
        "--limiter",
        choices=("window", "bucket"),
        default="window",
        help="The emulator's limiter: fixed windows of --burst-seconds, or a token bucket "
        "holding --burst-seconds of the limit.",
    )
    parser.add_argument("--no-tpm", action="store_true", help="Skip the TPM-bound case.")
    parser.add_argument("--no-startup", action="store_true", help="Skip the start-up probe.")
    parser.add_argument(
        "--whole-run", action="store_true", help="Only time maple enrich through a whole job."
    )
    parser.add_argument(
        "--timeline", action="store_true", help="Requests per second (--whole-run)."
    )
    parser.add_argument(
        "--client-checkout",
        default=None,
        help="Run the client (the lane, or maple enrich with --whole-run) from this checkout.",
    )
    parser.add_argument("--latency", default="0", help="Emulator answer latency, LOW-HIGH seconds.")
    parser.add_argument(
        "--bare", action="store_true", help="Also time a bare aiohttp client at the same pace."
    )
    parser.add_argument("--client-of", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_of:  # the client side of a case, run in another checkout's child
        print(json.dumps(send_rows(args, args.client_of)), flush=True)
        return
    if args.whole_run:
        args.burst_seconds = args.burst_seconds or 1.0
        whole_run(args)
        return
    if args.bare:
        bare(args, together=1)
        bare(args, together=10)
    if not args.no_startup:
        startup(args)
    for burst in [args.burst_seconds] if args.burst_seconds else [1.0, 60.0]:
        args.burst_seconds = burst
        case(args, "rpm-bound", args.rpm, None)
        if not args.no_tpm:
            case(args, "tpm-bound", 100_000, args.tpm)


if __name__ == "__main__":
    main()
