"""OpenAI's Responses API: ``POST /v1/responses`` in real time and ``/v1/responses`` batch lines.

A request body in, a ``response`` object out, with the chat engine's rules: the answer echoes
the last user input (``echo: ...``), a ``text.format`` JSON schema gets a conforming object,
faults are drawn per request, token counts follow ``emulator.core.tokens`` (``instructions`` count
as a system message) and reasoning follows ``emulator.openai.reasoning``. A reply cut short by
``max_output_tokens`` is ``status: "incomplete"`` with ``incomplete_details.reason``; a refusal
is a ``refusal`` content part. The chat-completions spellings of parameters (``messages``,
``max_tokens``, ``response_format``, ``reasoning_effort``) are refused with a 400 naming the
Responses spelling, as OpenAI's API does.
"""

import time
from collections.abc import Callable
from typing import Any

import orjson

from emulator.core.replies import echo_text, instance_for_schema, invalid_instance
from emulator.core.tokens import count_tokens, prompt_tokens
from emulator.openai.reasoning import (
    DEFAULT_EFFORT,
    effort_of,
    fit_to_limit,
    is_reasoning_model,
    reasoning_problem,
)
from emulator.openai.reasoning import reasoning_tokens as spent_reasoning

PATH = "/v1/responses"
#: chat-completions parameters and where the Responses API moved them
MOVED = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "response_format": "text.format",
    "reasoning_effort": "reasoning.effort",
}
_PARTS = {"input_text": "text", "output_text": "text"}


def input_messages(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``input`` as chat-style messages (text parts as ``text``, images as
    ``image_url``), None when it is not a string or a list of message objects."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw or not all(isinstance(m, dict) for m in raw):
        return None
    return [{"role": m.get("role", "user"), "content": _content(m.get("content"))} for m in raw]


def _content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _PARTS:
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url")}})
    return parts


def request_prompt_tokens(body: dict[str, Any]) -> int:
    """Input tokens of a Responses body (0 when its input is not readable)."""
    messages = input_messages(body)
    return prompt_tokens(messages, body.get("instructions")) if messages else 0


def text_schema(body: dict[str, Any]) -> Any:
    """The JSON schema of a ``text.format`` of type ``json_schema``, else None."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("schema", {})
    return None


def problem(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(message, param, code)`` of a 400 for a body the Responses API refuses."""
    if not isinstance(body.get("model"), str):
        return "Missing required parameter: 'model'.", "model", "missing_required_parameter"
    for old, new in MOVED.items():
        if old in body:
            message = (
                f"Unsupported parameter: '{old}'. In the Responses API, this parameter has "
                f"moved to '{new}'."
            )
            return message, old, "unsupported_parameter"
    if input_messages(body) is None:
        return "Missing required parameter: 'input'.", "input", "missing_required_parameter"
    if body.get("stream"):
        return "The emulator does not stream; send stream=false.", "stream", "unsupported_value"
    found = reasoning_problem(body, "reasoning")
    if found is not None:
        return (*found, "unsupported_parameter")
    return None


def answer(
    body: dict[str, Any], fault: str | None, new_id: Callable[[str], str]
) -> tuple[dict[str, Any], int, int]:
    """``(response object, input tokens, output tokens)`` for a valid body and drawn fault."""
    messages = input_messages(body) or []
    schema = text_schema(body)
    text = echo_text(messages)
    if schema is not None:
        value = (
            invalid_instance(schema, text)
            if fault == "invalid_output"
            else (instance_for_schema(schema, text))
        )
        text = orjson.dumps(value).decode()
    refusal = "I'm sorry, but I can't help with that request." if fault == "refused" else None
    shown = refusal or text
    thought = spent_reasoning(body, count_tokens(shown))
    cut = False
    limit = body.get("max_output_tokens")
    if refusal is None:
        text, thought, cut = fit_to_limit(text, thought, limit)
        shown = text
    visible = 0 if cut and not shown else count_tokens(shown)
    prompt = request_prompt_tokens(body)
    output: list[dict[str, Any]] = []
    if thought:
        output.append({"type": "reasoning", "id": new_id("rs_"), "summary": []})
    if refusal is not None:
        content: list[dict[str, Any]] = [{"type": "refusal", "refusal": refusal}]
    else:
        content = [{"type": "output_text", "text": text, "annotations": []}] if text else []
    if content:
        output.append(
            {
                "type": "message",
                "id": new_id("msg_"),
                "status": "incomplete" if cut else "completed",
                "role": "assistant",
                "content": content,
            }
        )
    effort = (effort_of(body) or DEFAULT_EFFORT) if is_reasoning_model(body["model"]) else None
    completion = visible + thought
    reply = {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": limit if isinstance(limit, int) else None,
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": effort, "summary": None},
        "service_tier": "default",
        "store": False,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": thought},
            "total_tokens": prompt + completion,
        },
        "user": None,
        "metadata": {},
    }
    return reply, prompt, completion
