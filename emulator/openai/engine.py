"""OpenAI request bodies in, (status, response body) out: shared by real-time and batch paths."""

import time
from typing import Any

import orjson

from emulator.core.faults import FaultDrawer, body_key
from emulator.core.files import RULES, FileProblem, Received, Uploaded, files_billed, reply_note
from emulator.core.labels import LabelRule
from emulator.core.outcome import Outcome, new_id
from emulator.core.replies import (
    echo_text,
    embedding_vector,
    has_image,
    instance_for_schema,
    invalid_instance,
)
from emulator.core.tokens import count_tokens, prompt_tokens
from emulator.openai import responses as responses_api
from emulator.openai.reasoning import fit_to_limit, reasoning_problem, reasoning_tokens

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def fault_outcome(fault: str, model: str) -> Outcome | None:
    """The error outcome of a transient fault class, or None when the class yields a 200."""
    if fault == "rate_limited":
        message = (
            f"Rate limit reached for {model} on requests per min (RPM): Limit 60, Used 60, "
            "Requested 1. Please try again in 1s."
        )
        return Outcome(
            429, error_body(message, "requests", None, "rate_limit_exceeded"), fault=fault
        )
    if fault == "insufficient_quota":
        message = "You exceeded your current quota, please check your plan and billing details."
        return Outcome(
            429, error_body(message, "insufficient_quota", None, "insufficient_quota"), fault=fault
        )
    if fault == "server_error":
        message = "The server had an error while processing your request. Sorry about that!"
        return Outcome(500, error_body(message, "server_error"), fault=fault)
    if fault == "invalid_request":
        message = "Invalid request: the emulator injected an invalid_request fault."
        return Outcome(400, error_body(message, "invalid_request_error"), fault=fault)
    if fault == "invalid_image":
        message = "Invalid image URL: the image could not be downloaded or decoded."
        return Outcome(
            400,
            error_body(message, "invalid_request_error", "messages", "invalid_image_url"),
            fault=fault,
        )
    return None


def file_refusal(problem: FileProblem) -> Outcome:
    """OpenAI's 400 for a file part it cannot use: an image URL it could not download
    (``invalid_image_url``) or that is no image (``invalid_image_format``), or a file it
    refuses."""
    if problem.fetch:
        message = f"Error while downloading the image URL: {problem}."
        body = error_body(message, "invalid_request_error", "messages", "invalid_image_url")
        return Outcome(400, body)
    if problem.linked:
        message = f"Invalid image: {problem}."
        body = error_body(message, "invalid_request_error", "messages", "invalid_image_format")
        return Outcome(400, body)
    return Outcome(400, error_body(f"Invalid file: {problem}.", "invalid_request_error"))


def _missing(param: str) -> Outcome:
    message = f"Missing required parameter: '{param}'."
    return Outcome(
        400, error_body(message, "invalid_request_error", param, "missing_required_parameter")
    )


def unsupported(message: str, param: str) -> Outcome:
    """OpenAI's 400 for a parameter the model or endpoint does not take."""
    return Outcome(
        400, error_body(message, "invalid_request_error", param, "unsupported_parameter")
    )


#: Embedding models that make one length only. OpenAI's reference for ``dimensions``: "Only
#: supported in text-embedding-3 and later models"
#: (https://platform.openai.com/docs/api-reference/embeddings/create#embeddings-create-dimensions,
#: the OpenAPI spec's ``CreateEmbeddingRequest.dimensions``). The API answers a body naming
#: ``dimensions`` for such a model (null included) 400 ``invalid_request_error`` "This model does
#: not support specifying dimensions.". Other names are served (an Azure deployment, Mistral's
#: models, a test's): only the models known not to shorten are refused.
FIXED_LENGTH_EMBEDDINGS = ("text-embedding-ada-",)


def _embedding_problem(body: dict[str, Any]) -> Outcome | None:
    """The 400 of an embeddings body the API refuses, else None."""
    if "dimensions" in body and str(body.get("model")).startswith(FIXED_LENGTH_EMBEDDINGS):
        message = "This model does not support specifying dimensions."
        return Outcome(400, error_body(message, "invalid_request_error"))
    return None


def _chat_problem(body: dict[str, Any]) -> Outcome | None:
    """The 400 of a chat body the API refuses, else None."""
    messages = body.get("messages")
    if not isinstance(body.get("model"), str):
        return _missing("model")
    if not isinstance(messages, list) or not messages:
        return _missing("messages")
    if body.get("stream"):
        message = "The emulator does not stream; send stream=false."
        return Outcome(
            400, error_body(message, "invalid_request_error", "stream", "unsupported_value")
        )
    if "reasoning" in body:
        message = "Unrecognized request argument supplied: reasoning (chat completions take "
        return unsupported(message + "reasoning_effort)", "reasoning")
    problem = reasoning_problem(body, "reasoning_effort")
    return unsupported(*problem) if problem is not None else None


def response_schema(body: dict[str, Any]) -> Any:
    """The JSON schema of a ``response_format: json_schema`` request (or ``json_object`` with a
    ``schema``, llama.cpp's Python server's form), else None."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_object" and "schema" in fmt:
        return fmt["schema"]
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if isinstance(spec, dict):
            return spec.get("schema", {})
        return {}
    return None


class OpenAIEngine:
    """Runs chat completion and embedding bodies with the configured faults."""

    def __init__(
        self,
        drawer: FaultDrawer,
        embedding_dimensions: int,
        omit_usage: bool = False,
        ignore_dimensions: bool = False,
    ) -> None:
        self.drawer = drawer
        self.dimensions = embedding_dimensions
        self.omit_usage = omit_usage  # answer without ``usage`` (billing still counts it)
        self.ignore_dimensions = ignore_dimensions  # every vector at ``dimensions``'s length
        self.label = LabelRule()  # how a one-field enum or boolean reply is chosen
        self.fetch_urls = False  # fetch the URLs of file parts (``EmulatorConfig.fetch_urls``)
        self.uploaded: Uploaded = None  # an uploaded file's bytes by id (a chat file_id part)

    def run(self, url: str, body: Any, key: int | None = None) -> Outcome:
        """Run ``body`` as a request to ``url`` (``/v1/chat/completions``, ``/v1/responses`` or
        ``/v1/embeddings``)."""
        if not isinstance(body, dict):
            return Outcome(
                400, error_body("The request body must be a JSON object.", "invalid_request_error")
            )
        if url == "/v1/embeddings":
            outcome = self.embeddings(body, key)
        elif url == responses_api.PATH:
            outcome = self.responses(body, key)
        else:
            outcome = self.chat(body, key)
        if self.omit_usage and outcome.status == 200:
            outcome.body.pop("usage", None)
        return outcome

    def responses(self, body: dict[str, Any], key: int | None = None) -> Outcome:
        """A ``response`` object for a Responses API ``body`` (``emulator.openai.responses``)."""
        found = responses_api.problem(body)
        if found is not None:
            message, param, code = found
            return Outcome(400, error_body(message, "invalid_request_error", param, code))
        fault = None
        if self.drawer.active:
            key = body_key(body) if key is None else key
            messages = responses_api.input_messages(body)
            schema = responses_api.text_schema(body) is not None
            fault = self.drawer.draw(key, image=has_image(messages), schema=schema)
            failed = fault_outcome(fault, body["model"]) if fault else None
            if failed is not None:
                return failed
        reply, prompt, completion = responses_api.answer(body, fault, new_id)
        return Outcome(200, reply, prompt, completion, fault)

    def chat(self, body: dict[str, Any], key: int | None = None) -> Outcome:
        """A ``chat.completion`` for ``body``."""
        refused = _chat_problem(body)
        if refused is not None:
            return refused
        messages = body["messages"]
        try:
            files = files_billed(messages, RULES["openai"], self.fetch_urls, self.uploaded)
        except FileProblem as exc:
            return file_refusal(exc)
        schema = response_schema(body)
        fault = None
        if self.drawer.active:
            key = body_key(body) if key is None else key
            fault = self.drawer.draw(key, image=has_image(messages), schema=schema is not None)
            failed = fault_outcome(fault, body["model"]) if fault else None
            if failed is not None:
                return failed
        return self._completion(body, messages, schema, fault, files)

    def _completion(
        self,
        body: dict[str, Any],
        messages: list[Any],
        schema: Any,
        fault: str | None,
        files: tuple[list[Received], int] = ([], 0),
    ) -> Outcome:
        text = echo_text(messages) + reply_note(files[0])
        content: str | None = text
        refusal = None
        if fault == "refused":
            content, refusal = None, REFUSAL_TEXT
        elif schema is not None:
            value = (
                invalid_instance(schema, text)
                if fault == "invalid_output"
                else instance_for_schema(schema, text, self.label)
            )
            content = orjson.dumps(value).decode()
        finish = "stop"
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        reply = refusal if content is None else content
        thought = reasoning_tokens(body, count_tokens(reply or ""))
        if content is not None:
            content, thought, cut = fit_to_limit(content, thought, limit)
            finish = "length" if cut else finish
            reply = content
        prompt = prompt_tokens(messages) + files[1]
        # an answer the reasoning left no room for is no tokens (else at least one, as ever)
        completion = (0 if thought and not reply else count_tokens(reply or "")) + thought
        result = {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "refusal": refusal,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": chat_usage(prompt, completion, reasoning=thought),
            "service_tier": "default",
            "system_fingerprint": "fp_emulator",
        }
        return Outcome(200, result, prompt, completion, fault, file_parts=len(files[0]))

    def embeddings(self, body: dict[str, Any], key: int | None = None) -> Outcome:
        """A ``list`` of embeddings for ``body["input"]``."""
        if not isinstance(body.get("model"), str):
            return _missing("model")
        items = _embedding_inputs(body.get("input"))
        if items is None:
            return _missing("input")
        if (refused := _embedding_problem(body)) is not None:
            return refused
        if self.drawer.active:
            fault = self.drawer.draw(
                body_key(body) if key is None else key, image=False, schema=False
            )
            failed = fault_outcome(fault, body["model"]) if fault and fault != "refused" else None
            if failed is not None:
                return failed
        dims = body.get("dimensions", body.get("output_dimension"))  # OpenAI's, Mistral's
        if not isinstance(dims, int) or not 0 < dims <= 4096 or self.ignore_dimensions:
            dims = self.dimensions
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": embedding_vector(text, dims, as_base64),
            }
            for i, text in enumerate(items)
        ]
        tokens = sum(count_tokens(text) for text in items)
        result = {
            "id": new_id("embd-"),  # Mistral's list has one (its SDK requires it), OpenAI's not
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return Outcome(200, result, tokens, 0, units=len(items), kind="embedding")


def chat_usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    """OpenAI ``CompletionUsage`` with the detail objects filled (``reasoning``: of the
    completion tokens, those spent reasoning)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _embedding_inputs(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw:
        if all(isinstance(item, str) for item in raw):
            return list(raw)
        if all(isinstance(item, int) for item in raw):
            return [" ".join(map(str, raw))]
        if all(isinstance(item, list) for item in raw):
            return [" ".join(map(str, item)) for item in raw]
    return None
