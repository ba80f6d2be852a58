"""Provider calls of a many-batch job with and without pushed batch events (`maple webhooks`).

    python bench/webhooks.py --batches 200

One job of ``--batches`` batches (``--rows-per-batch`` rows each) through `maple enrich` on the
emulator (its own process), whose batches take ``--batch-seconds`` (log-normal spread
``--spread``), three ways: polled every 2 s (`maple enrich`'s default), polled every 30 s, and
with the emulator pushing OpenAI's signed events to a `maple webhooks` process and a poll
interval of 600 s. Prints, per way, the wall time and what ``/_emulator/stats`` counted:
batch list pages and single-batch retrievals (the polls: the sensor, the collect runs and the
start-up check), uploads and creates, events pushed.
"""

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import polars as pl
from scale import start_emulator

SECRET = "whsec_" + base64.b64encode(b"bench-webhook-signing-key-32byte").decode()


def start_webhooks(root: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "OPENAI_WEBHOOK_SECRET": SECRET}
    err = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "maple_assets.cli", "webhooks", "--port", "0",
         "--storage", str(root)],
        stdout=subprocess.DEVNULL, stderr=err, env=env,
    )  # fmt: skip
    for _ in range(300):
        found = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text())
        if found:
            return proc, f"http://127.0.0.1:{found.group(1)}/webhooks/openai"
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"maple webhooks did not start: {log.read_text()}")


def run(work: Path, args: argparse.Namespace, poll: float, pushed: bool) -> dict[str, float]:
    root = work / "root"
    hook = start_webhooks(root, work / "webhooks.log") if pushed else None
    flags = ["--batch-seconds-spread", str(args.spread), "--seed", "1"]
    if hook is not None:
        flags += ["--webhook-url", hook[1], "--webhook-secret", SECRET]
    emulator, url = start_emulator(args.batch_seconds, *flags)
    try:
        source = work / "items.csv"
        rows = args.batches * args.rows_per_batch
        pl.DataFrame({"title": [f"item {i}" for i in range(rows)]}).write_csv(source)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "maple_assets.cli", "enrich", str(source),
             "--prompt", "Brand of: {title}", "--model", "gpt-4o-mini", "--provider", "emulator",
             "--storage", str(root), "--output", str(work / "out.parquet"), "--quiet",
             "--max-requests-per-batch", str(args.rows_per_batch),
             "--max-enqueued-tokens", "1000000000",  # the queue limit given, not probed
             "--poll-interval", str(poll)],
            env={**os.environ, "MAPLE_EMULATOR_URL": url}, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"maple enrich exited {done.returncode}: {done.stderr[-2000:]}")
        stats = json.loads(urllib.request.urlopen(f"{url}/_emulator/stats").read())
    finally:
        emulator.terminate()
        emulator.wait()
        if hook is not None:
            hook[0].terminate()
            hook[0].wait()
    names = ("batch_list_pages", "batch_retrievals", "files_uploaded", "batches_created")
    return {"wall_s": wall, **{n: stats[n] for n in names}, "pushed": stats["webhooks_sent"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rows-per-batch", type=int, default=2)
    parser.add_argument("--batch-seconds", type=float, default=60.0)
    parser.add_argument("--spread", type=float, default=0.5)
    parser.add_argument("--ways", default="2,30,pushed", help="which ways, of 2, 30 and pushed")
    args = parser.parse_args()
    ways = [("polled every 2 s", 2.0, False), ("polled every 30 s", 30.0, False),
            ("pushed, --poll-interval 600", 600.0, True)]  # fmt: skip
    chosen = args.ways.split(",")
    ways = [w for w, key in zip(ways, ("2", "30", "pushed"), strict=True) if key in chosen]
    print(f"{args.batches} batches of {args.rows_per_batch} rows, {args.batch_seconds} s "
          f"(spread {args.spread}); load {os.getloadavg()[0]:.1f}")  # fmt: skip
    head = ("way", "wall s", "list pages", "retrievals", "polls", "uploads", "creates", "events")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for name, poll, pushed in ways:
        with tempfile.TemporaryDirectory(prefix="maple-bench-webhooks-") as tmp:
            got = run(Path(tmp), args, poll, pushed)
        polls = got["batch_list_pages"] + got["batch_retrievals"]
        cells = (name, f"{got['wall_s']:.0f}", got["batch_list_pages"], got["batch_retrievals"],
                 polls, got["files_uploaded"], got["batches_created"], got["pushed"])  # fmt: skip
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
