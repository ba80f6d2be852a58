"""The floor for bench/scale.py: the same data work in one process, nothing else, per stage.

Each stage does the least work the product's stage of the same name must do, with the fastest
tools the project uses, and its CPU is timed on its own:

- ``input_shards``: read the input in blocks, render the prompt, hash each row (the row digest
  incremental reruns compare), write the rendered rows as zstd Parquet;
- ``submissions``: build the provider's JSONL request lines (polars expressions, as the product
  does) and the SHA-256 content hash of each file;
- ``raw_responses``: decode reply lines shaped exactly as the emulator writes them (every field
  it sends, not only the kept ones) into msgspec structs of the kept fields, and write those
  as zstd Parquet;
- ``merged``: join the answers back to the rows and write the output Parquet.

No orchestration, no storage of intermediate state beyond those files, no HTTP, no retries.
Reply lines are built before the clock starts (the provider writes them, not the client).

    python bench/floor.py INPUT.parquet OUTPUT.parquet PROMPT [--json FIGURES.json]
"""

import argparse
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import orjson
import polars as pl
import pyarrow.parquet as pq

from maple_engine.inputs.sources import iter_blocks
from maple_engine.inputs.templates import parse_template, render_expr
from maple_engine.providers.base import RequestSpec, json_string_expr
from maple_engine.providers.openai.batch import OpenAIBatchProvider

SHARD_ROWS = 50_000
# An emulator reply line around its two variable parts (custom_id and the answer).
REPLY_HEAD = (
    ',"response":{"status_code":200,"request_id":"req_emu000000000005000000","body":'
    '{"id":"chatcmpl-emu000000000005000000","object":"chat.completion","created":1796446878,'
    '"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":'
)
REPLY_TAIL = (
    ',"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":'
    '{"prompt_tokens":35,"completion_tokens":31,"total_tokens":66,"prompt_tokens_details":'
    '{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,'
    '"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},'
    '"service_tier":"default","system_fingerprint":"fp_emulator"}},"error":null}'
)


class _Message(msgspec.Struct, gc=False):
    content: str


class _Choice(msgspec.Struct, gc=False):
    message: _Message


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int
    completion_tokens: int


class _Body(msgspec.Struct, gc=False):
    choices: list[_Choice]
    usage: _Usage


class _Response(msgspec.Struct, gc=False):
    body: _Body


class _Line(msgspec.Struct, gc=False):
    custom_id: str
    response: _Response


_DECODE = msgspec.json.Decoder(_Line).decode


class Clock:
    """CPU seconds per stage (this process, all threads)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.process_time()
        try:
            yield
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - started


def replies(frame: pl.DataFrame) -> bytes:
    """The emulator's reply lines for ``frame``'s rows (its answer echoes the prompt)."""
    lines = frame.select(
        pl.concat_str(
            [
                pl.lit('{"id":"batch_req_emu000000000005000000","custom_id":'),
                json_string_expr(pl.col("custom_id")),
                pl.lit(REPLY_HEAD),
                json_string_expr(pl.lit("echo: ") + pl.col("text")),
                pl.lit(REPLY_TAIL),
            ]
        )
    ).to_series()
    return "\n".join(lines.to_list()).encode()


def decode(content: bytes) -> pl.DataFrame:
    lines = [_DECODE(raw) for raw in content.splitlines()]
    bodies = [line.response.body for line in lines]
    return pl.DataFrame(
        {
            "custom_id": [line.custom_id for line in lines],
            "llm_response": [body.choices[0].message.content for body in bodies],
            "input_tokens": [body.usage.prompt_tokens for body in bodies],
            "output_tokens": [body.usage.completion_tokens for body in bodies],
        }
    )


def run(source: str, output: str, prompt: str, scratch: Path) -> dict[str, float]:
    clock = Clock()
    provider = OpenAIBatchProvider(api_key="unused")
    text = render_expr(parse_template(prompt))
    body = provider.body_expr(RequestSpec("gpt-4o-mini"), pl.col("text"), None)
    shards: list[Path] = []
    offset = 0
    with clock.stage("input_shards"):
        for block in iter_blocks(source):  # the same pull-based reader the platform uses
            ids = pl.int_range(offset, offset + block.height)
            frame = block.with_columns(
                pl.format("r{}", ids).alias("custom_id"),
                text.alias("text"),
                pl.struct(block.columns).hash(seed=0).alias("digest"),
            )
            shard = scratch / f"s{len(shards):05d}.parquet"
            frame.write_parquet(shard, compression="zstd")
            shards.append(shard)
            offset += block.height
    with clock.stage("submissions"):
        for shard in shards:
            frame = pl.read_parquet(shard, columns=["custom_id", "text"])
            data = provider.encode(frame.select("custom_id", body.alias("request")))
            hashlib.sha256(data).hexdigest()
    answers_files: list[Path] = []
    for shard in shards:  # the provider's side: not timed
        content = replies(pl.read_parquet(shard, columns=["custom_id", "text"]))
        answers = scratch / f"{shard.stem}.jsonl"
        answers.write_bytes(content)
        answers_files.append(answers)
    results: list[Path] = []
    with clock.stage("raw_responses"):
        for answers in answers_files:
            result = answers.with_suffix(".results.parquet")
            decode(answers.read_bytes()).write_parquet(result, compression="zstd")
            results.append(result)
    with clock.stage("merged"):
        writer: pq.ParquetWriter | None = None
        for shard, result in zip(shards, results, strict=True):
            rows = pl.read_parquet(shard).drop("text", "digest")
            merged = rows.join(
                pl.read_parquet(result), on="custom_id", how="left", maintain_order="left"
            )
            table = merged.drop("custom_id").to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(output, table.schema, compression="zstd")
            writer.write_table(table)
        if writer is not None:
            writer.close()
    return clock.cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("prompt")
    parser.add_argument("--json", help="write the CPU seconds per stage here")
    args = parser.parse_args()
    scratch = Path(args.output).with_suffix(".floor")
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        cpu = run(args.input, args.output, args.prompt, scratch)
    finally:
        for path in scratch.iterdir():
            path.unlink()
        scratch.rmdir()
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(cpu))
    for stage, seconds in cpu.items():
        print(f"{stage:<14} {seconds:6.2f} s CPU")


if __name__ == "__main__":
    main()
