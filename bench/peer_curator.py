"""Run bespokelabs-curator over a prompts file against the emulator (bench/peers.py runs this).

Runs in the peer's own virtual environment (``pip install bespokelabs-curator==0.1.31``, the
pin of the project's ``peers`` extra), not the project's:

    python bench/peer_curator.py URL {batch,online} PROMPTS.parquet CACHE_DIR [RPM]

The emulator, like OpenAI's docs, wants a batch input file named ``*.jsonl``; the openai SDK
names raw bytes ``upload``, so the upload is given a name here. Nothing else is changed.
"""

import sys
from typing import Any

import pyarrow.parquet as pq
from openai.resources import files


def _named_upload() -> None:
    create = files.AsyncFiles.create

    async def named(self: Any, *, file: Any, **kwargs: Any) -> Any:
        if isinstance(file, bytes):
            file = ("batch.jsonl", file, "application/jsonl")
        return await create(self, file=file, **kwargs)

    files.AsyncFiles.create = named  # type: ignore[method-assign]


def main() -> None:
    url, mode, source, _cache = sys.argv[1:5]
    rpm = int(sys.argv[5]) if len(sys.argv) > 5 else None
    _named_upload()
    from bespokelabs import curator

    prompts = pq.read_table(source, columns=["prompt"]).column("prompt").to_pylist()
    params: dict[str, Any] = {"base_url": f"{url}/v1", "api_key": "bench"}
    if mode == "batch":
        params["completion_window"] = "24h"
    elif rpm:
        params["max_requests_per_minute"] = rpm
    llm = curator.LLM(
        model_name="gpt-4o-mini", backend="openai", batch=mode == "batch", backend_params=params
    )
    result = llm(prompts)
    rows = len(result.dataset) if hasattr(result, "dataset") else len(result)
    if rows != len(prompts):
        raise SystemExit(f"curator returned {rows} rows for {len(prompts)} prompts")


if __name__ == "__main__":
    main()
