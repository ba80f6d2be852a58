"""Real-time provider throughput at the rate limit, against the emulator.

Starts the emulator in a separate process (``maple emulator --rpm/--tpm``) so that server and
client do not share a GIL, runs a few thousand rows through the real-time provider without
telling it the limits (it learns them from the headers), and prints the achieved requests (or
tokens) per minute as a share of the limit and the share of requests answered 429.

    python bench/realtime.py                     # RPM-bound (3000 RPM) and TPM-bound cases
    python bench/realtime.py --rows 5000 --provider anthropic-realtime
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import polars as pl

from resources.providers.base import RequestSpec, ShardPayload
from resources.providers.realtime import (
    AnthropicRealtimeProvider,
    OpenAIRealtimeProvider,
    RealtimeProvider,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_emulator(rpm: int | None, tpm: int | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "maple_assets.cli", "emulator", "--port", str(port)]
    cmd += ["--rpm", str(rpm)] if rpm else []
    cmd += ["--tpm", str(tpm)] if tpm else []
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


def payload(provider: RealtimeProvider, rows: int, model: str) -> ShardPayload:
    spec = RequestSpec(model, system="Extract the brand.")
    frame = pl.DataFrame(
        {"t": [f"Maple Farm product {i}, pack of {i % 12 + 1}" for i in range(rows)]}
    )
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("bench", "s00000", 1, model, requests)


def case(name: str, provider_name: str, rows: int, rpm: int | None, tpm: int | None) -> None:
    proc, url = start_emulator(rpm, tpm)
    try:
        os.environ.update(OPENAI_API_KEY="bench", ANTHROPIC_API_KEY="bench")
        root = tempfile.mkdtemp(prefix="maple-bench-")
        provider: RealtimeProvider
        if provider_name == "anthropic-realtime":
            provider = AnthropicRealtimeProvider(base_url=url, checkpoint_root=root)
            model = "claude-haiku-4-5"
        else:
            provider = OpenAIRealtimeProvider(base_url=f"{url}/v1", checkpoint_root=root)
            model = "gpt-4o-mini"
        work = payload(provider, rows, model)
        started = time.monotonic()
        sub = provider.submit(work)
        minutes = (time.monotonic() - started) / 60
        results = provider.results(sub, provider.poll([sub])[sub.batch_id])
        stats = httpx.get(f"{url}/_emulator/stats", timeout=10).json()
    finally:
        proc.terminate()
        proc.wait()
    ok = int((results["status"] == "succeeded").sum())
    tokens = int(results["input_tokens"].sum() + results["output_tokens"].sum())
    achieved_rpm, achieved_tpm = rows / minutes, tokens / minutes
    share = achieved_rpm / rpm if rpm and not tpm else achieved_tpm / (tpm or 1)
    bound = "RPM" if rpm and not tpm else "TPM"
    print(
        f"{name:<10} {provider_name:<19} rows {rows:>5}  ok {ok:>5}  "
        f"{minutes * 60:6.1f}s  {achieved_rpm:7.0f} req/min  {achieved_tpm:9.0f} tok/min  "
        f"{bound} share {share:6.1%}  429s {stats['realtime_429']:>4} "
        f"({stats['realtime_429'] / max(1, stats['realtime_requests']):.2%})  "
        f"billed twice {stats['bodies_billed_twice']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--provider", default="openai-realtime")
    parser.add_argument("--rpm", type=int, default=3000)
    parser.add_argument("--tpm", type=int, default=120_000)
    args = parser.parse_args()
    case("rpm-bound", args.provider, args.rows, args.rpm, None)
    case("tpm-bound", args.provider, args.rows, 100_000, args.tpm)


if __name__ == "__main__":
    main()
