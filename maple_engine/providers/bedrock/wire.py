"""Bedrock batch inference records: Claude's native (Anthropic Messages) body per record.

Input line: ``{"recordId": <custom_id>, "modelInput": {"anthropic_version": "bedrock-2023-05-31",
"max_tokens", "messages", "system"?, ...params}}``. Output line (``<input>.out``): the same plus
``modelOutput`` (an Anthropic ``message``) or ``error`` (``{"errorCode", "errorMessage"}``).
Chat jobs run Anthropic Claude models (model ids containing ``anthropic.``); embedding jobs run
Titan Text Embeddings V2: ``modelInput`` ``{"inputText", "dimensions", "normalize": true}``,
``modelOutput`` ``{"embedding": [...], "inputTextTokenCount"}``.
"""

import re
from typing import Any

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass, classify_http
from maple_engine.model import EMBEDDING
from maple_engine.providers.anthropic.messages import message_body_expr, parse_message
from maple_engine.providers.base import RequestSpec, failed_row, json_literal, json_string_expr
from maple_engine.providers.batch_api import jsonl
from maple_engine.providers.vectors import embedding_row

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
HEAD, MID = '{"recordId":', ',"modelInput":'
TITAN_EMBED_V2 = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)  # Titan V2's output sizes; 1024 when none is asked


def check_model(model: str) -> None:
    if "anthropic." not in model:
        raise ConfigError(
            f"--provider bedrock supports Anthropic Claude models (ids like "
            f"'anthropic.claude-3-haiku-20240307-v1:0' or 'us.anthropic.claude-...'), not "
            f"{model!r}: Bedrock batch records carry each model's native body."
        )


def body_expr(
    spec: RequestSpec, user: pl.Expr, image: pl.Expr | None, files: pl.Expr | None = None
) -> pl.Expr:
    """A record's ``modelInput``: Claude's for a chat job (``files``: its file blocks,
    `maple_engine.providers.anthropic.file_parts`), Titan's for an embedding job."""
    if spec.kind == EMBEDDING:
        return titan_body_expr(spec, user)
    return claude_body_expr(spec, user, image, files)


def titan_body_expr(spec: RequestSpec, text: pl.Expr) -> pl.Expr:
    """``{"inputText": T, "dimensions": N, "normalize": true, ...params}`` (Titan V2's native
    body); a model or dimension Titan V2 does not serve is refused before anything is sent."""
    if "titan-embed-text-v2" not in spec.model:
        raise ConfigError(
            f"--provider bedrock embeds with Titan Text Embeddings V2 (--model {TITAN_EMBED_V2}), "
            f"not {spec.model!r}."
        )
    dims = spec.dimensions if spec.dimensions is not None else TITAN_DIMENSIONS[-1]
    if dims not in TITAN_DIMENSIONS:
        raise ConfigError(
            f"Titan Text Embeddings V2 makes vectors of 256, 512 or 1024 dimensions, not {dims}: "
            "pass --dimensions 256, 512 or 1024."
        )
    tail = "," + json_literal({"dimensions": dims, "normalize": True, **spec.params})[1:]
    return pl.concat_str([pl.lit('{"inputText":'), json_string_expr(text), pl.lit(tail)])


def claude_body_expr(
    spec: RequestSpec, user: pl.Expr, image: pl.Expr | None, files: pl.Expr | None = None
) -> pl.Expr:
    """Claude's native Bedrock body (the Messages API without ``model``)."""
    check_model(spec.model)
    if image is not None:
        raise ConfigError(
            "--provider bedrock cannot send image URLs: Claude on Bedrock takes images as "
            "base64 data only. Drop --image-column or use --provider anthropic."
        )
    lead = {"anthropic_version": BEDROCK_ANTHROPIC_VERSION}
    return message_body_expr(spec, user, None, lead, files=files)


def record_lines(requests: pl.DataFrame) -> bytes:
    return jsonl(requests, HEAD, MID)


def parse_output_line(line: dict[str, Any]) -> dict[str, Any]:
    """One ``.jsonl.out`` line -> a result row."""
    record_id = line.get("recordId")
    output = line.get("modelOutput")
    if isinstance(output, dict) and "embedding" in output:
        return embedding_row(record_id, output["embedding"], int(output["inputTextTokenCount"]))
    if isinstance(output, dict):
        return parse_message(record_id, output)
    error = line.get("error") or {}
    code = int(error.get("errorCode") or 500)
    message = str(error.get("errorMessage") or "the record failed")
    cls = classify_http(code).value
    if code == 400 and "image" in message.lower():
        cls = FailureClass.INVALID_IMAGE.value
    return failed_row(record_id, cls, message)


def job_slug(job: str) -> str:
    """The job name in the characters a Bedrock job name allows."""
    return re.sub(r"[^a-zA-Z0-9]+", "-", job).strip("-")[:36] or "job"


def job_name(job: str, shard: str, attempt: int) -> str:
    return f"maple-{job_slug(job)}-{shard}-a{attempt}"[:63]


def parse_input_name(uri: str) -> tuple[str, int, str] | None:
    """(shard, attempt, content hash) from ``.../<shard>-a<attempt>-<hash>.jsonl``."""
    match = re.search(r"/([^/]+)-a(\d+)-([0-9a-f]+)\.jsonl$", uri)
    return (match[1], int(match[2]), match[3]) if match else None
