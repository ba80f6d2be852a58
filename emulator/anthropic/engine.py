"""Anthropic Messages bodies in, (status, response body) out: shared by real-time and batches."""

from typing import Any

import orjson

from emulator.core.faults import FaultDrawer, body_key
from emulator.core.files import RULES, FileProblem, FileRule, Received, files_billed, reply_note
from emulator.core.labels import LabelRule
from emulator.core.outcome import Outcome, new_id
from emulator.core.replies import echo_text, has_image, instance_for_schema, invalid_instance
from emulator.core.tokens import count_tokens, prompt_tokens

REFUSAL_EXPLANATION = "The emulator injected a refusal for this request."

#: Anthropic error type for each HTTP status the emulator returns.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str, request_id: str | None = None) -> dict[str, Any]:
    """Anthropic's error envelope ``{"type": "error", "error": {"type", "message"}, ...}``."""
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return body


_FAULTS = {
    "rate_limited": (429, "Number of request tokens has exceeded your per-minute rate limit."),
    "insufficient_quota": (402, "Your credit balance is too low to access the Anthropic API."),
    "server_error": (500, "Internal server error"),
    "invalid_request": (400, "Invalid request: the emulator injected an invalid_request fault."),
    "invalid_image": (400, "messages.0.content.0.image.source: Could not process image"),
}


def output_schema(params: dict[str, Any]) -> Any:
    """The JSON schema of ``output_config.format`` or ``output_format``, else None."""
    config = params.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else params.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("schema", {})
    return None


def _invalid(message: str) -> Outcome:
    return Outcome(400, error_body(400, message))


#: The ``anthropic-version`` values served, and the request fields each newer one removed
#: (2026-10-21: the sampling parameters, refused even at their defaults).
API_VERSIONS = ("2023-06-01", "2026-10-21")
DEFAULT_VERSION = "2023-06-01"
REMOVED_IN = {"2026-10-21": ("temperature", "top_p", "top_k")}


def version_problem(version: str) -> str | None:
    """Why an ``anthropic-version`` header is refused, or None."""
    if version in API_VERSIONS:
        return None
    return (
        f"anthropic-version: {version!r} is not a valid version (one of {', '.join(API_VERSIONS)})"
    )


def check_params(params: Any, version: str = DEFAULT_VERSION) -> str | None:  # noqa: PLR0911  (one exit per rule)
    """Why ``params`` is not a valid Messages request under API ``version``, or None."""
    if not isinstance(params, dict):
        return "params: Input should be an object"
    if not isinstance(params.get("model"), str):
        return "model: Field required"
    max_tokens = params.get("max_tokens")
    if max_tokens is None:
        return "max_tokens: Field required"
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required"
    if params.get("stream"):
        return "stream: streaming is not supported here"
    removed = [name for name in REMOVED_IN.get(version, ()) if name in params]
    if removed:
        return f"{removed[0]}: Extra inputs are not permitted (removed in API version {version})"
    return None


#: Extended thinking (``thinking: {"type": "enabled", "budget_tokens": N}``), as Anthropic's
#: page documents it (https://platform.claude.com/docs/en/build-with-claude/extended-thinking,
#: formerly docs.anthropic.com/en/docs/build-with-claude/extended-thinking): "Thinking isn't
#: compatible with temperature or top_k modifications as well as forced tool use"; top_p may be
#: set between 0.95 and 1; ``budget_tokens`` is at least 1,024 and below ``max_tokens`` (the
#: interleaved-thinking beta, which lifts that bound for tool use, is not emulated). The
#: messages are the API's own 400 ``invalid_request_error`` texts.
THINKING_MIN_BUDGET = 1024
#: models without extended thinking (the Claude 3 and 3.5 models: the models overview's
#: "Extended thinking" row, https://platform.claude.com/docs/en/about-claude/models/overview);
#: a name (or a Bedrock id) holding one of these is answered 400 for ``thinking``
NO_THINKING = ("claude-3-haiku", "claude-3-sonnet", "claude-3-opus", "claude-3-5-", "claude-2")
THINKING_DOCS = (
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    "#important-considerations-when-using-extended-thinking"
)


def thinking_problem(params: dict[str, Any]) -> str | None:  # noqa: PLR0911  (one exit per rule)
    """Why the API refuses ``params``' extended thinking with its other fields, or None."""
    thinking = params.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    model = str(params.get("model", ""))
    if any(name in model for name in NO_THINKING):
        return f"thinking: {model} does not support extended thinking."
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int):
        return "thinking.enabled.budget_tokens: Field required"
    if budget < THINKING_MIN_BUDGET:
        return (
            "thinking.enabled.budget_tokens: Input should be greater than or equal to "
            f"{THINKING_MIN_BUDGET}"
        )
    if budget >= params["max_tokens"]:
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {THINKING_DOCS}"
        )
    if params.get("temperature", 1) != 1:
        return (
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
            f"documentation at {THINKING_DOCS}"
        )
    if params.get("top_k") is not None:
        return (
            "`top_k` must be unset when thinking is enabled. Please consult our documentation "
            f"at {THINKING_DOCS}"
        )
    top_p = params.get("top_p")
    if isinstance(top_p, int | float) and top_p < 0.95:
        return (
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. "
            f"Please consult our documentation at {THINKING_DOCS}"
        )
    choice = params.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in {"any", "tool"}:
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


class AnthropicEngine:
    """Runs Messages API bodies with the configured faults."""

    def __init__(self, drawer: FaultDrawer) -> None:
        self.drawer = drawer
        self.label = LabelRule()  # how a one-field enum or boolean reply is chosen
        self.fetch_urls = False  # fetch the URLs of file parts (``EmulatorConfig.fetch_urls``)

    def run(
        self,
        params: Any,
        key: int | None = None,
        service_tier: str = "standard",
        version: str = DEFAULT_VERSION,
        files_rule: FileRule = RULES["anthropic"],
    ) -> Outcome:
        """A ``message`` (or an error envelope) for ``params`` under API ``version``, its
        files held to ``files_rule`` (Bedrock's own for Claude on Bedrock)."""
        problem = check_params(params, version)
        if problem is None:
            # checked when the request runs: in a batch, the request's own ``errored`` result
            # (the batch-processing guide, platform.claude.com/docs/en/build-with-claude/
            # batch-processing: each request's params are validated asynchronously)
            problem = thinking_problem(params)
        if problem is not None:
            return _invalid(problem)
        messages = params["messages"]
        try:
            files = files_billed(messages, files_rule, self.fetch_urls)
        except FileProblem as exc:
            where = "messages.0.content: Unable to download the image" if exc.fetch else "file"
            return _invalid(f"{where}: {exc}")
        schema = output_schema(params)
        fault = None
        if self.drawer.active:
            key = body_key(params) if key is None else key
            fault = self.drawer.draw(key, image=has_image(messages), schema=schema is not None)
            if fault in _FAULTS:
                status, message = _FAULTS[fault]
                return Outcome(status, error_body(status, message), fault=fault)
        return self._message(params, messages, schema, fault, service_tier, files)

    def _message(  # noqa: PLR0917  (the request, its fault, its tier and its files)
        self,
        params: dict[str, Any],
        messages: list[Any],
        schema: Any,
        fault: str | None,
        tier: str,
        files: tuple[list[Received], int] = ([], 0),
    ) -> Outcome:
        text = echo_text(messages) + reply_note(files[0])
        if schema is not None and fault != "refused":
            value = (
                invalid_instance(schema, text)
                if fault == "invalid_output"
                else instance_for_schema(schema, text, self.label)
            )
            text = orjson.dumps(value).decode()
        stop_reason = "end_turn"
        stop_details = None
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if fault == "refused":
            stop_reason = "refusal"
            stop_details = {"type": "refusal", "category": None, "explanation": REFUSAL_EXPLANATION}
            content = []
        elif count_tokens(text) > params["max_tokens"]:
            content[0]["text"] = text[: params["max_tokens"] * 4]
            stop_reason = "max_tokens"
        prompt = prompt_tokens(messages, params.get("system")) + files[1]
        completion = count_tokens(content[0]["text"]) if content else 0
        message = {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": params["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": stop_details,
            "usage": {
                "input_tokens": prompt,
                "output_tokens": completion,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "service_tier": tier,
            },
        }
        return Outcome(200, message, prompt, completion, fault, file_parts=len(files[0]))
