"""The floor for bench/scale.py: the same data work in one process, nothing else.

Read the input in blocks, render the prompt, encode the provider JSONL, decode reply lines
(built here as the emulator would answer), join them back by custom_id, write Parquet.
No orchestration, no storage of intermediate state, no HTTP, no retries.

    python bench/floor.py INPUT.parquet OUTPUT.parquet PROMPT
"""

import io
import sys

import polars as pl
import pyarrow.json as pajson
import pyarrow.parquet as pq

from maple_engine.inputs.sources import iter_blocks
from maple_engine.inputs.templates import parse_template, render_expr
from maple_engine.providers.base import RequestSpec, json_string_expr
from maple_engine.providers.openai.batch import OpenAIBatchProvider

REPLY_HEAD = '"response":{"status_code":200,"body":{"choices":[{"message":{"content":'
REPLY_TAIL = '}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}}}'


def replies(frame: pl.DataFrame) -> bytes:
    lines = frame.select(
        pl.concat_str(
            [
                pl.lit('{"custom_id":'),
                json_string_expr(pl.col("custom_id")),
                pl.lit("," + REPLY_HEAD),
                json_string_expr(pl.lit("echo: ") + pl.col("text")),
                pl.lit(REPLY_TAIL),
            ]
        )
    ).to_series()
    return "\n".join(lines.to_list()).encode()


def decode(content: bytes) -> pl.DataFrame:
    table = pl.DataFrame(pajson.read_json(io.BytesIO(content)))
    message = (
        pl.col("response").struct.field("body").struct.field("choices").list.first()
    ).struct.field("message")
    return table.select("custom_id", message.struct.field("content").alias("llm_response"))


def main(source: str, output: str, prompt: str) -> None:
    provider = OpenAIBatchProvider(api_key="unused")
    text = render_expr(parse_template(prompt))
    writer: pq.ParquetWriter | None = None
    offset = 0
    for block in iter_blocks(source):  # the same pull-based reader the platform uses
        ids = pl.int_range(offset, offset + block.height)
        frame = block.with_columns(pl.format("r{}", ids).alias("custom_id"), text.alias("text"))
        body = provider.body_expr(RequestSpec("gpt-4o-mini"), pl.col("text"), None)
        frame = frame.with_columns(body.alias("request"))
        provider.encode(frame.select("custom_id", "request"))
        answers = decode(replies(frame))
        merged = frame.drop("text", "request").join(
            answers, on="custom_id", how="left", maintain_order="left"
        )
        table = merged.drop("custom_id").to_arrow()
        if writer is None:
            writer = pq.ParquetWriter(output, table.schema, compression="zstd")
        writer.write_table(table)
        offset += block.height
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
