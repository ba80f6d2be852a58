"""The Gemini API wire format, shared by the batch and the real-time Gemini providers.

- ``gemini_body_expr``: a ``GenerateContentRequest`` per row (polars expressions, no Python loop).
- ``parse_generate_response``: a ``GenerateContentResponse`` -> a result row; a blocked prompt
  or a candidate stopped for safety/recitation is ``refused``.
- ``classify_status``: a ``google.rpc.Status`` (HTTP or gRPC code, canonical status name) ->
  the failure taxonomy.
- Embeddings: an ``EmbedContentRequest`` per row (``{"content": {"parts": [{"text"}]},
  "outputDimensionality"?}``); a reply's ``embedding.values`` (batch) or ``embeddings[].values``
  (``batchEmbedContents``) become the row's vector, ``usageMetadata.promptTokenCount`` its tokens.

Usage: ``promptTokenCount`` includes ``cachedContentTokenCount``; output is
``candidatesTokenCount`` plus ``thoughtsTokenCount`` (thinking is billed as output).
"""

from typing import Any

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.base import (
    ModelFamily,
    PromptCaching,
    RequestSpec,
    failed_row,
    json_literal,
    json_string_expr,
)
from maple_engine.providers.vectors import embedding_row, group_rows

#: Gemini 2.5+ caches a repeated prefix implicitly (no hint to send): 1,024 tokens and up on the
#: Flash models, 4,096 on Pro; reads at the cached-input price, writes free.
CACHING = PromptCaching(hint="implicit", default_minimum=1024, minimum_tokens=(("pro", 4096),))
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"
#: How every encoded embedding request starts (a chat request starts ``{"contents":``).
EMBED_HEAD = '{"content":'
#: Google's documented model families: embedding models and their longest vectors, then Gemini.
MODELS = (
    ModelFamily("gemini-embedding", EMBEDDING, max_dimensions=3072),
    ModelFamily("text-embedding-004", EMBEDDING, max_dimensions=768),
    ModelFamily("gemini-", CHAT),
)
#: ``batchEmbedContents`` takes at most this many texts a call.
MAX_TEXTS_PER_REQUEST = 100
#: Google's documented input limit of its embedding models (genai-prices lists none).
INPUT_LIMITS = (("gemini-embedding", 2048), ("text-embedding-004", 2048))
#: Candidates stopped for these reasons carry no usable answer: the row is ``refused``.
REFUSAL_REASONS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
#: ``--param`` names in the OpenAI spelling -> ``generationConfig`` fields.
_CONFIG_NAMES = {
    "max_tokens": "maxOutputTokens",
    "max_output_tokens": "maxOutputTokens",
    "max_completion_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "stop": "stopSequences",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "candidate_count": "candidateCount",
}
_SERVER = {"INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "UNKNOWN", "ABORTED"}
_SERVER_CODES = {2, 4, 10, 13, 14, 500, 502, 503, 504}


def gemini_api_key(api_key: str | None) -> str:
    if not api_key:
        raise ConfigError(
            "GEMINI_API_KEY is not set: export it (or pass api_key to the provider resource)."
        )
    return api_key


def gemini_base_url(base_url: str | None) -> str:
    """``base_url`` (scheme and host, no version), else Google's endpoint."""
    return (base_url or DEFAULT_BASE_URL).rstrip("/")


def model_path(model: str) -> str:
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def generation_config(spec: RequestSpec) -> dict[str, Any]:
    config = {_CONFIG_NAMES.get(k, _camel(k)): v for k, v in spec.params.items()}
    if spec.response_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = spec.response_schema
    return config


def gemini_body_expr(
    spec: RequestSpec,
    user: pl.Expr,
    image: pl.Expr | None,
    service_tier: str | None = None,
    files: pl.Expr | None = None,
) -> pl.Expr:
    """``{"contents":[{"role":"user","parts":[...]}],"systemInstruction"?,"generationConfig"?,
    "serviceTier"?}``, or an embedding job's ``EmbedContentRequest``; ``files``: the row's
    encoded ``inlineData`` parts (`file_parts`), each after a comma."""
    if spec.kind == EMBEDDING:
        return embed_body_expr(spec, user)
    parts = [pl.lit('{"contents":[{"role":"user","parts":[{"text":'), json_string_expr(user)]
    if image is not None:
        parts += [pl.lit('},{"fileData":{"fileUri":'), json_string_expr(image), pl.lit("}")]
    parts.append(pl.lit("}"))
    if files is not None:
        parts.append(files)
    tail = "]}]"
    if spec.system is not None:
        tail += ',"systemInstruction":{"parts":[{"text":' + json_literal(spec.system) + "}]}"
    config = generation_config(spec)
    if config:
        tail += ',"generationConfig":' + json_literal(config)
    if service_tier is not None:
        tail += ',"serviceTier":' + json_literal(service_tier)
    return pl.concat_str([*parts, pl.lit(tail + "}")])


def embed_body_expr(spec: RequestSpec, text: pl.Expr) -> pl.Expr:
    """``{"content":{"parts":[{"text":T}]},"outputDimensionality"?, ...}``: ``--param`` names in
    snake_case become the request's camelCase fields (``task_type`` -> ``taskType``)."""
    fields = {_camel(k): v for k, v in spec.params.items()}
    if spec.dimensions is not None:
        fields["outputDimensionality"] = spec.dimensions
    tail = "}]}" + ("," + json_literal(fields)[1:-1] if fields else "") + "}"
    head = EMBED_HEAD + '{"parts":[{"text":'
    return pl.concat_str([pl.lit(head), json_string_expr(text), pl.lit(tail)])


def embeds(requests: pl.DataFrame) -> bool:
    """Whether an attempt's encoded requests are embedding requests."""
    first = requests.get_column("request").head(1).to_list()
    return bool(first) and str(first[0]).startswith(EMBED_HEAD)


def _tokens(response: dict[str, Any]) -> int | None:
    """The reply's input tokens; None when it reports no usage (an embedding reply may not)."""
    count = (response.get("usageMetadata") or {}).get("promptTokenCount")
    return int(count) if count is not None else None


def parse_embed_response(custom_id: Any, response: dict[str, Any]) -> dict[str, Any]:
    """A batch line's ``EmbedContentResponse`` (``{"embedding": {"values"}}``) -> a result row."""
    return embedding_row(custom_id, response["embedding"]["values"], _tokens(response))


def parse_embeddings(custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``batchEmbedContents`` reply (``{"embeddings": [{"values"}]}``, in request order) -> a
    row per text, the call's tokens split over them."""
    return group_rows(custom_ids, [e["values"] for e in body["embeddings"]], _tokens(body))


def classify_status(status: dict[str, Any]) -> str:
    """Failure class of a ``google.rpc.Status`` (batch line error or HTTP error body)."""
    name = str(status.get("status") or "")
    code = int(status.get("code") or 0)
    message = str(status.get("message") or "")
    lowered = message.lower()
    if name == "RESOURCE_EXHAUSTED" or code in {8, 429}:
        if "billing" in lowered or "credit" in lowered:
            return FailureClass.INSUFFICIENT_QUOTA.value
        return FailureClass.RATE_LIMITED.value
    if name in _SERVER or code in _SERVER_CODES:
        return FailureClass.SERVER_ERROR.value
    if file_gone(status):
        return FailureClass.INVALID_FILE.value
    if "image" in lowered:
        return FailureClass.INVALID_IMAGE.value
    return FailureClass.INVALID_REQUEST.value


def file_gone(status: dict[str, Any]) -> bool:
    """Whether a ``google.rpc.Status`` says a file the request names through the Files API is
    gone: Google answers a deleted (48 hours after its upload) or unknown file with 403
    ``PERMISSION_DENIED``, "You do not have permission to access the File ... or it may not
    exist." (github.com/googleapis/python-genai/issues/1218): the row's failure, not the key's."""
    named = str(status.get("status") or "") == "PERMISSION_DENIED" or status.get("code") in {7, 403}
    return named and "access the file" in str(status.get("message") or "").lower()


def status_row(custom_id: Any, status: dict[str, Any]) -> dict[str, Any]:
    message = str(status.get("message") or status.get("status") or "error")
    return failed_row(custom_id, classify_status(status), message)


def _usage(response: dict[str, Any]) -> dict[str, int | None]:
    usage = response.get("usageMetadata") or {}
    if not usage:  # no usage reported: the collection estimates the tokens
        return {"input_tokens": None, "output_tokens": None, "reasoning_tokens": None}
    thoughts = usage.get("thoughtsTokenCount")  # billed as output; only thinking models
    output = int(usage.get("candidatesTokenCount") or 0) + int(thoughts or 0)
    return {
        "input_tokens": int(usage.get("promptTokenCount") or 0),
        "cached_input_tokens": int(usage.get("cachedContentTokenCount") or 0),
        "cache_write_tokens": 0,
        "output_tokens": output,
        "reasoning_tokens": int(thoughts) if thoughts is not None else None,
    }


def parse_generate_response(custom_id: Any, response: dict[str, Any]) -> dict[str, Any]:
    """A ``GenerateContentResponse`` -> a result row."""
    row: dict[str, Any] = {"custom_id": custom_id, "billed": True, **_usage(response)}
    blocked = (response.get("promptFeedback") or {}).get("blockReason")
    candidate = (response.get("candidates") or [{}])[0]
    reason = candidate.get("finishReason")
    if blocked or reason in REFUSAL_REASONS:
        why = (
            f"not resent: the prompt was blocked before generation (blockReason {blocked})"
            if blocked
            else f"the model refused (finishReason {reason})"
        )
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=why)
        if blocked:  # decided before generating: the same prompt is blocked again
            row["resendable"] = False
        return row
    parts = (candidate.get("content") or {}).get("parts") or []
    text = "".join(str(p.get("text", "")) for p in parts if not p.get("thought"))
    row.update(status="succeeded", response=text)
    return row


def parse_result_line(line: dict[str, Any], custom_id: Any = None) -> dict[str, Any]:
    """One batch result (file line ``{"key", "response"|"error"}`` or inlined response)."""
    key = line.get("key") or (line.get("metadata") or {}).get("key") or custom_id
    if line.get("error") is not None:
        return status_row(key, line["error"])
    response = line.get("response") or {}
    if "embedding" in response:
        return parse_embed_response(key, response)
    return parse_generate_response(key, response)
