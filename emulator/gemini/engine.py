"""Gemini ``GenerateContentRequest`` in, ``GenerateContentResponse`` (or a google.rpc.Status) out;
``EmbedContentRequest`` in, embeddings out.

Shared by ``generateContent`` / ``batchEmbedContents`` (real time) and the Batch API. Requests
are accepted in the proto JSON spelling (camelCase) and in snake_case, as Google's endpoints do.
Token counts follow ``emulator.core.tokens``: each ``contents`` entry (and the system
instruction) is one message.
"""

from typing import Any

import orjson

from emulator.core.faults import FaultDrawer, body_key
from emulator.core.files import RULES, FileProblem, Received, Uploaded, files_billed, reply_note
from emulator.core.labels import LabelRule
from emulator.core.outcome import Outcome
from emulator.core.replies import (
    ECHO_PREFIX,
    embedding_vector,
    instance_for_schema,
    invalid_instance,
)
from emulator.core.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, count_tokens

#: HTTP status -> canonical google.rpc code name, as in Google's JSON error envelope.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
#: ``batchEmbedContents`` takes at most this many requests a call; dimensions up to this many.
MAX_EMBED_REQUESTS = 100
MAX_EMBED_DIMENSIONS = 3072
#: The same codes as gRPC numbers: batch result lines carry ``google.rpc.Status`` with these.
GRPC_CODES = {
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}

_FAULTS = {
    "rate_limited": (429, "Resource has been exhausted (e.g. check quota)."),
    "insufficient_quota": (
        429,
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "server_error": (500, "An internal error has occurred. Please retry or report it."),
    "invalid_request": (400, "Request contains an invalid argument."),
    "invalid_image": (400, "Unable to process input image. Please retry or report it."),
}


def error_status(status: int, message: str, grpc: bool = False) -> dict[str, Any]:
    """A ``google.rpc.Status``: HTTP code (envelope) or gRPC code number (batch result line).

    A 429 carries ``google.rpc.RetryInfo`` with the wait, as Google's API does.
    """
    name = STATUS_NAMES.get(status, "UNKNOWN")
    code = GRPC_CODES.get(name, 2) if grpc else status
    body: dict[str, Any] = {"code": code, "message": message, "status": name}
    if status == 429:
        body["details"] = [{"@type": RETRY_INFO, "retryDelay": "1s"}]
    return body


#: Thoughts per answer token when a request turns thinking on (``thinkingConfig`` with a
#: ``thinkingBudget`` other than 0, or a ``thinkingLevel``); a positive budget caps them.
THOUGHTS_PER_TOKEN = 4


def thoughts_tokens(request: dict[str, Any], answer_tokens: int) -> int:
    """The thinking tokens a request spends (none unless its ``thinkingConfig`` asks)."""
    config = _get(request, "generationConfig", "generation_config") or {}
    thinking = (
        _get(config, "thinkingConfig", "thinking_config") if isinstance(config, dict) else None
    )
    if not isinstance(thinking, dict):
        return 0
    budget = _get(thinking, "thinkingBudget", "thinking_budget")
    level = _get(thinking, "thinkingLevel", "thinking_level")
    if budget == 0 or (budget is None and level is None):
        return 0
    spent = THOUGHTS_PER_TOKEN * answer_tokens
    return min(spent, budget) if isinstance(budget, int) and budget > 0 else spent


def _get(obj: Any, camel: str, snake: str) -> Any:
    if not isinstance(obj, dict):
        return None
    return obj.get(camel, obj.get(snake))


def _parts_text(content: Any) -> str:
    parts = _get(content, "parts", "parts") or []
    return " ".join(p["text"] for p in parts if isinstance(p, dict) and "text" in p)


def _has_image(contents: list[Any]) -> bool:
    for content in contents:
        for part in _get(content, "parts", "parts") or []:
            if isinstance(part, dict) and (
                _get(part, "fileData", "file_data") or _get(part, "inlineData", "inline_data")
            ):
                return True
    return False


def check_request(request: Any) -> str | None:
    """Why a GenerateContentRequest is invalid (message of a 400), or None."""
    if not isinstance(request, dict):
        return "Invalid JSON payload received. Expected an object."
    contents = request.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for index, content in enumerate(contents):
        if not _get(content, "parts", "parts"):
            where = f"GenerateContentRequest.contents[{index}].parts"
            return f"* {where}: contents.parts must not be empty."
    return None


def check_embed_request(request: Any, where: str) -> str | None:
    """Why an EmbedContentRequest is invalid (message of a 400), or None."""
    if not isinstance(request, dict):
        return f"* {where}: expected an object."
    if not _parts_text(request.get("content")):
        return f"* {where}.content: content is not specified"
    dims = _get(request, "outputDimensionality", "output_dimensionality")
    if dims is not None and (
        not isinstance(dims, int) or isinstance(dims, bool) or not 0 < dims <= MAX_EMBED_DIMENSIONS
    ):
        return f"* {where}.output_dimensionality: must be between 1 and {MAX_EMBED_DIMENSIONS}"
    return None


def _schema(request: dict[str, Any]) -> Any:
    config = _get(request, "generationConfig", "generation_config") or {}
    schema = _get(config, "responseJsonSchema", "response_json_schema")
    return schema if schema is not None else _get(config, "responseSchema", "response_schema")


def _prompt_tokens(request: dict[str, Any]) -> int:
    total = REPLY_PRIMING
    system = _get(request, "systemInstruction", "system_instruction")
    if system and _parts_text(system):
        total += count_tokens(_parts_text(system)) + MESSAGE_OVERHEAD
    for content in request["contents"]:
        total += count_tokens(_parts_text(content)) + MESSAGE_OVERHEAD
    return total


class GeminiEngine:
    """Runs GenerateContentRequests with the configured faults."""

    def __init__(
        self, drawer: FaultDrawer, embedding_dimensions: int = 16, omit_usage: bool = False
    ) -> None:
        self.drawer = drawer
        self.dimensions = embedding_dimensions
        self.omit_usage = omit_usage  # embedding replies without ``usageMetadata``
        self.label = LabelRule()  # how a one-field enum or boolean reply is chosen
        self.fetch_urls = False  # fetch the URLs of file parts (``EmulatorConfig.fetch_urls``)
        self.uploaded: Uploaded = None  # a Files API file's bytes by its uri (a fileData part)

    def embed(self, requests: Any, key: int, grpc: bool = False) -> Outcome:
        """``{"embeddings": [{"values"}], "usageMetadata"}`` for a list of EmbedContentRequests
        (one fault draw for the call); ``units`` is the number of texts embedded."""
        where = "BatchEmbedContentsRequest.requests"
        if not isinstance(requests, list) or not requests:
            return Outcome(400, error_status(400, f"* {where}: at least one is required", grpc))
        if len(requests) > MAX_EMBED_REQUESTS:
            message = f"* {where}: at most {MAX_EMBED_REQUESTS} requests can be in one batch"
            return Outcome(400, error_status(400, message, grpc))
        for index, request in enumerate(requests):
            problem = check_embed_request(request, f"{where}[{index}]")
            if problem is not None:
                return Outcome(400, error_status(400, problem, grpc))
        if self.drawer.active:
            fault = self.drawer.draw(key, image=False, schema=False)
            if fault in _FAULTS:
                status, message = _FAULTS[fault]
                return Outcome(status, error_status(status, message, grpc), fault=fault)
        embeddings, tokens = [], 0
        for request in requests:
            text = _parts_text(request["content"])
            dims = _get(request, "outputDimensionality", "output_dimensionality")
            embeddings.append({"values": embedding_vector(text, dims or self.dimensions)})
            tokens += count_tokens(text)
        usage = {"promptTokenCount": tokens, "totalTokenCount": tokens}
        body = {"embeddings": embeddings, "usageMetadata": usage}
        if self.omit_usage:
            del body["usageMetadata"]
        return Outcome(200, body, tokens, 0, units=len(requests), kind="embedding")

    def run(self, request: Any, model: str, key: int | None = None, grpc: bool = False) -> Outcome:
        """A GenerateContentResponse (status 200) or an error Status for ``request``."""
        problem = check_request(request)
        if problem is not None:
            return Outcome(400, error_status(400, problem, grpc))
        try:
            contents = request["contents"]
            files = files_billed(contents, RULES["gemini"], self.fetch_urls, self.uploaded)
        except FileProblem as exc:
            if exc.gone:  # Google answers a deleted or unknown file with 403 PERMISSION_DENIED
                # and this message (github.com/googleapis/python-genai/issues/1218)
                return Outcome(403, error_status(403, str(exc), grpc))
            lead = "Unable to process input image: " if exc.fetch else "Invalid file: "
            return Outcome(400, error_status(400, lead + str(exc), grpc))
        schema = _schema(request)
        fault = None
        if self.drawer.active:
            key = body_key(request) if key is None else key
            image = _has_image(request["contents"])
            fault = self.drawer.draw(key, image=image, schema=schema is not None)
            if fault in _FAULTS:
                status, message = _FAULTS[fault]
                return Outcome(status, error_status(status, message, grpc), fault=fault)
        return self._response(request, model, schema, fault, files)

    def _response(
        self,
        request: dict[str, Any],
        model: str,
        schema: Any,
        fault: str | None,
        files: tuple[list[Received], int] = ([], 0),
    ) -> Outcome:
        users = [c for c in request["contents"] if _get(c, "role", "role") in (None, "user")]
        text = ECHO_PREFIX + (_parts_text(users[-1]) if users else "") + reply_note(files[0])
        if schema is not None and fault != "refused":
            value = (
                invalid_instance(schema, text)
                if fault == "invalid_output"
                else instance_for_schema(schema, text, self.label)
            )
            text = orjson.dumps(value).decode()
        prompt = _prompt_tokens(request) + files[1]
        if fault == "refused":
            candidate: dict[str, Any] = {"finishReason": "SAFETY", "index": 0}
            completion = 0
        else:
            completion = count_tokens(text)
            content = {"parts": [{"text": text}], "role": "model"}
            candidate = {"content": content, "finishReason": "STOP", "index": 0}
        thoughts = thoughts_tokens(request, completion)
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": completion,
            "totalTokenCount": prompt + completion + thoughts,
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts  # billed as output
        body = {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model.removeprefix("models/"),
        }
        return Outcome(200, body, prompt, completion + thoughts, fault, file_parts=len(files[0]))
