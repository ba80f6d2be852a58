"""Measure batch throughput over HTTP: ``python -m emulator.bench --rows 200000``.

Starts an in-process emulator (``batch_seconds=0``), uploads shards of 50,000 chat lines,
creates a batch per shard, waits for each to complete and downloads its output, then prints
lines per second for the whole round trip and for the server-side processing alone.
"""

import argparse
import time

import httpx
import orjson

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

SHARD = 50_000


def _shard(start: int, count: int) -> bytes:
    lines = []
    for i in range(start, start + count):
        body = {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Classify the sentiment. Answer with one word."},
                {
                    "role": "user",
                    "content": f"Review {i}: fine product, slow shipping, damaged box.",
                },
            ],
            "max_tokens": 50,
        }
        line = {
            "custom_id": f"row-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": body,
        }
        lines.append(orjson.dumps(line))
    return b"\n".join(lines) + b"\n"


def run(rows: int) -> dict[str, float]:
    """Push ``rows`` lines through the batch API; returns timings and rates."""
    shards = [_shard(start, min(SHARD, rows - start)) for start in range(0, rows, SHARD)]
    headers = {"Authorization": "Bearer bench"}
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0)) as server,
        httpx.Client(base_url=f"{server.url}/v1", headers=headers, timeout=600) as http,
    ):
        began = time.perf_counter()
        batch_ids = []
        for data in shards:
            upload = http.post(
                "/files", files={"file": ("in.jsonl", data)}, data={"purpose": "batch"}
            )
            payload = {"input_file_id": upload.json()["id"], "endpoint": "/v1/chat/completions"}
            created = http.post("/batches", json=payload | {"completion_window": "24h"})
            batch_ids.append(created.json()["id"])
        submitted = time.perf_counter()
        downloaded = 0
        for batch_id in batch_ids:
            batch = http.get(f"/batches/{batch_id}").json()
            downloaded += len(http.get(f"/files/{batch['output_file_id']}/content").content)
        finished = time.perf_counter()
        processed = server.stats()["batch_lines_processed"]
    total = finished - began
    return {
        "rows": rows,
        "processed": processed,
        "seconds": round(total, 2),
        "submit_seconds": round(submitted - began, 2),
        "lines_per_second": round(rows / total),
        "output_mb": round(downloaded / 1e6, 1),
    }


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    print(orjson.dumps(run(parser.parse_args().rows)).decode())


if __name__ == "__main__":
    main()
