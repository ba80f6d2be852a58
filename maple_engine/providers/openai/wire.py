"""The OpenAI wire format shared by the batch and real-time providers: base URL, credentials,
the chat-completions, Responses and embeddings request bodies (as polars expressions) and their
parsed replies.

A body's first bytes tell its API (one attempt's requests go to one): ``{"messages":`` chat
completions, ``{"input":[`` the Responses API, ``{"input":"`` embeddings.
"""

from typing import Any

import orjson
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.base import (
    ModelFamily,
    PromptCaching,
    RequestSpec,
    json_literal,
    json_string_expr,
    splice_params,
    user_content_expr,
)
from maple_engine.providers.vectors import embedding_row, group_rows

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: OpenAI caches any prompt prefix of 1,024+ tokens on its own, in 128-token steps (reads at the
#: model's cached-input price, writes free); ``prompt_cache_key`` steers requests sharing a prefix
#: to the same cache.
#: OpenAI's documented model families: embedding models and their longest vectors (ada-002
#: makes 1,536 values and takes no ``dimensions``), then the chat models.
MODELS = (
    ModelFamily("text-embedding-3-small", EMBEDDING, max_dimensions=1536),
    ModelFamily("text-embedding-3-large", EMBEDDING, max_dimensions=3072),
    ModelFamily("text-embedding-ada-002", EMBEDDING, shortens=False),
    ModelFamily("gpt-", CHAT),
    ModelFamily("chatgpt-", CHAT),
)
CACHING = PromptCaching(hint="cache-key", default_minimum=1024, step_tokens=128, ttl_s=300)
IMAGE_PART = '{"type":"image_url","image_url":{"url":{url}}}'
IMAGE_INPUT = '{"type":"input_image","image_url":{url}}'  # a Responses input's image
CHAT_PATH = "/chat/completions"
RESPONSES_PATH = "/responses"
EMBEDDINGS_PATH = "/embeddings"
# An embeddings body starts with its input text, a Responses body with its input messages (a
# chat body with its messages): the marks that tell them apart in an attempt's requests (a
# batch file holds one endpoint's lines).
EMBEDDING_HEAD = '{"input":"'
RESPONSES_HEAD = '{"input":[{'
#: OpenAI's reasoning models (reasoning effort, reasoning tokens); others refuse the parameter.
REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
#: the two ``response_format`` forms that carry a JSON schema (`response_format`)
JSON_SCHEMA, JSON_OBJECT = "json_schema", "json_object"
# One /embeddings request: at most 2,048 inputs and 300,000 tokens summed over its inputs.
MAX_INPUTS_PER_REQUEST = 2048
MAX_TOKENS_PER_REQUEST = 300_000
INPUTS_PER_REQUEST = 100  # the real-time default: pacing stays fine-grained


def openai_base_url(base_url: str | None) -> str:
    """``base_url``, else OpenAI's (ending in /v1)."""
    return (base_url or DEFAULT_BASE_URL).rstrip("/")


def openai_headers(api_key: str | None, env: str = "OPENAI_API_KEY") -> dict[str, str]:
    """The bearer header for ``api_key``; a clear error naming ``env`` without one."""
    if not api_key:
        raise ConfigError(
            f"{env} is not set: export it (or pass api_key to the provider "
            "resource), or use --provider emulator to try the platform without a key."
        )
    return {"Authorization": f"Bearer {api_key}"}


def response_format(schema: Any, name: str, schema_format: str = JSON_SCHEMA) -> dict[str, Any]:
    """The ``response_format`` asking for JSON that follows ``schema``: OpenAI's strict
    ``json_schema``, or ``json_object`` with the schema beside it (llama.cpp's Python server,
    which answers the strict form with a 500)."""
    if schema_format == JSON_OBJECT:
        return {"type": JSON_OBJECT, "schema": schema}
    return {"type": JSON_SCHEMA, "json_schema": {"name": name, "schema": schema, "strict": True}}


def chat_body_expr(
    spec: RequestSpec,
    user: pl.Expr,
    image: pl.Expr | None,
    schema_format: str = JSON_SCHEMA,
    files: pl.Expr | None = None,
) -> pl.Expr:
    """The encoded ``/chat/completions`` body of every row (a response schema in
    ``schema_format``: `response_format`)."""
    head: dict[str, Any] = {"model": spec.model, **spec.params}
    if spec.cache and spec.cache_key and "prompt_cache_key" not in head:
        head["prompt_cache_key"] = spec.cache_key
    if spec.response_schema is not None:
        head["response_format"] = response_format(
            spec.response_schema, spec.schema_name, schema_format
        )
    system = (
        '{"role":"system","content":' + json_literal(spec.system) + "},"
        if spec.system is not None
        else ""
    )
    body = pl.concat_str(
        [
            pl.lit('{"messages":[' + system + '{"role":"user","content":'),
            user_content_expr(user, image, IMAGE_PART, files=files),
            pl.lit("}]}"),
        ]
    )
    return splice_params(body, head)


def responses_body_expr(spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
    """The encoded ``/responses`` body of every row: the prompt as the input's one user
    message, the system prompt as ``instructions``, a response schema as ``text.format``."""
    head: dict[str, Any] = {"model": spec.model, **spec.params}
    if spec.system is not None:
        head["instructions"] = spec.system
    if spec.cache and spec.cache_key and "prompt_cache_key" not in head:
        head["prompt_cache_key"] = spec.cache_key
    if spec.response_schema is not None:
        fmt = {
            "type": "json_schema",
            "name": spec.schema_name,
            "schema": spec.response_schema,
            "strict": True,
        }
        text = head.get("text")
        head["text"] = {**(text if isinstance(text, dict) else {}), "format": fmt}
    body = pl.concat_str(
        [
            pl.lit('{"input":[{"role":"user","content":'),
            user_content_expr(user, image, IMAGE_INPUT, text_part="input_text"),
            pl.lit("}]}"),
        ]
    )
    return splice_params(body, head)


def body_expr(
    spec: RequestSpec,
    user: pl.Expr,
    image: pl.Expr | None,
    schema_format: str = JSON_SCHEMA,
    files: pl.Expr | None = None,
) -> pl.Expr:
    """The encoded body of every row: a chat completion (or a Responses request), or an
    embedding of the text; ``files``: the row's encoded file parts (`file_parts`; a chat
    completion's: a job with files is refused on the Responses API where it is declared)."""
    if spec.kind == EMBEDDING:
        return embedding_body_expr(spec, user)
    if spec.endpoint == "responses":
        return responses_body_expr(spec, user, image)
    return chat_body_expr(spec, user, image, schema_format, files)


def embedding_body_expr(
    spec: RequestSpec, text: pl.Expr, *, dimensions: str = "dimensions", encoding: str = "base64"
) -> pl.Expr:
    """The encoded ``/embeddings`` body of every row: one input, vectors as base64 float32
    (an API with OpenAI's body under other names: its ``dimensions`` field and its
    ``encoding_format``)."""
    head: dict[str, Any] = {"model": spec.model, "encoding_format": encoding, **spec.params}
    if spec.dimensions is not None:
        head[dimensions] = spec.dimensions
    body = pl.concat_str([pl.lit('{"input":'), json_string_expr(text), pl.lit("}")])
    return splice_params(body, head)


def path_of(requests: pl.DataFrame) -> str:
    """The API path an attempt's encoded requests go to."""
    first = requests.get_column("request").head(1).to_list()
    return path_of_body(str(first[0])) if first else CHAT_PATH


def path_of_body(body: str) -> str:
    """The API path of one encoded body: ``/embeddings``, ``/responses`` or chat's."""
    if body.startswith(EMBEDDING_HEAD):
        return EMBEDDINGS_PATH
    if body.startswith(RESPONSES_HEAD):
        return RESPONSES_PATH
    return CHAT_PATH


def parse_reply(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A 2xx reply body -> a result row: an embedding ``list``, a Responses ``response`` or a
    chat completion."""
    if body.get("object") == "list":
        return parse_embeddings(custom_id, body)
    if body.get("object") == "response":
        return parse_response(custom_id, body)
    return parse_chat_completion(custom_id, body)


def parse_response(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A Responses ``response`` -> a result row, as a chat completion maps: refusals and a
    content filter are ``refused``; a reply cut short by ``max_output_tokens`` keeps its text
    (as chat's ``length``), and one that reasoning left no text at all is ``invalid_output``,
    not resent (the same request would spend the same again)."""
    usage = body.get("usage") or {}
    row: dict[str, Any] = {
        "custom_id": custom_id,
        "billed": True,
        "input_tokens": _reported(usage, "input_tokens"),
        "cached_input_tokens": int(
            (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        ),
        "cache_write_tokens": 0,
        "output_tokens": _reported(usage, "output_tokens"),
        "reasoning_tokens": reasoning_tokens(usage.get("output_tokens_details")),
    }
    texts, refusals = [], []
    for item in body.get("output") or []:
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                texts.append(str(part.get("text") or ""))
            elif part.get("type") == "refusal":
                refusals.append(str(part.get("refusal") or "refused"))
    reason = (body.get("incomplete_details") or {}).get("reason")
    if refusals or reason == "content_filter":
        why = "; ".join(refusals) or "content filtered"
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=why)
        return row
    text = "".join(texts)
    if body.get("status") == "incomplete" and not text:
        why = (
            f"not resent: the reply is incomplete ({reason or 'no reason given'}) with no text: "
            f"{row['reasoning_tokens'] or 0} of its {row['output_tokens'] or 0} output tokens were "
            "reasoning; raise max_output_tokens (--param max_output_tokens=N) or lower the "
            "reasoning effort"
        )
        row.update(
            status="failed",
            failure_class=FailureClass.INVALID_OUTPUT.value,
            error=why,
            resendable=False,
        )
        return row
    row.update(status="succeeded", response=text)
    return row


def parse_embeddings(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """An embeddings ``list`` of one input -> a result row whose response is the vector as
    base64 little-endian float32 (what ``llm_embedding`` is decoded from)."""
    data = body.get("data") or [{}]
    return embedding_row(custom_id, data[0].get("embedding"), _input_tokens(body))


def embedding_groups(
    rows: list[tuple[str, str]], per_request: int
) -> list[tuple[tuple[str, ...], str]]:
    """Consecutive rows' one-input bodies as requests of up to ``per_request`` inputs (and
    about ``MAX_TOKENS_PER_REQUEST`` tokens at 4 characters a token): one body, its inputs a
    list. The rows of an attempt share model, dimensions and parameters."""
    groups: list[tuple[tuple[str, ...], str]] = []
    ids: list[str] = []
    texts: list[str] = []
    head: dict[str, Any] = {}
    chars = 0
    for custom_id, encoded in rows:
        body = orjson.loads(encoded)
        text = str(body.pop("input"))
        if ids and (len(ids) >= per_request or chars + len(text) > 4 * MAX_TOKENS_PER_REQUEST):
            groups.append((tuple(ids), orjson.dumps({"input": texts, **head}).decode()))
            ids, texts, chars = [], [], 0
        ids.append(custom_id)
        texts.append(text)
        head, chars = body, chars + len(text)
    if ids:
        groups.append((tuple(ids), orjson.dumps({"input": texts, **head}).decode()))
    return groups


def parse_embedding_group(
    custom_ids: tuple[str, ...], body: dict[str, Any]
) -> list[dict[str, Any]]:
    """An embeddings ``list`` of several inputs -> one result row per input (by ``index``),
    the request's tokens split over them (``group_rows``)."""
    total = _input_tokens(body)
    vectors = {int(item["index"]): item["embedding"] for item in body["data"]}
    return group_rows(custom_ids, [vectors[i] for i in range(len(custom_ids))], total)


def _input_tokens(body: dict[str, Any]) -> int | None:
    """An embeddings reply's input tokens; None when it has no usage (some servers send
    none: the collection estimates them from the text)."""
    count = (body.get("usage") or {}).get("prompt_tokens")
    return int(count) if count is not None else None


def _reported(usage: dict[str, Any], name: str) -> int | None:
    """A usage count of a reply that has a usage block (0 when the block lacks it), None when
    the reply has none at all."""
    return int(usage.get(name) or 0) if usage else None


def reasoning_tokens(details: Any) -> int | None:
    """``reasoning_tokens`` of a usage's output details (part of the output tokens), None
    where the reply does not report them."""
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return int(value) if value is not None else None


def parse_chat_completion(custom_id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion body -> a result row; refusals and content filters are ``refused``."""
    usage = body.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    row: dict[str, Any] = {
        "custom_id": custom_id,
        "billed": True,
        "input_tokens": _reported(usage, "prompt_tokens"),
        "cached_input_tokens": cached,
        "cache_write_tokens": 0,
        "output_tokens": _reported(usage, "completion_tokens"),
        "reasoning_tokens": reasoning_tokens(usage.get("completion_tokens_details")),
    }
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        reason = message.get("refusal") or "content filtered"
        row.update(status="failed", failure_class=FailureClass.REFUSED.value, error=str(reason))
        return row
    row.update(status="succeeded", response=message.get("content") or "")
    return row


def failed_row(
    custom_id: Any, cls: FailureClass, message: Any, *, resendable: bool | None = None
) -> dict[str, Any]:
    """The result row of a request the provider failed (not billed); ``resendable=False`` if
    it may never be sent again."""
    return {
        "custom_id": custom_id,
        "status": "failed",
        "failure_class": cls.value,
        "error": str(message),
        "resendable": resendable,
        "billed": False,
    }
