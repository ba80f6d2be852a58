"""Reasoning models: which models think before answering, and how many tokens they spend on it.

The contract (deterministic, so tests can hold the client's books to it):

- a reasoning model is one whose name starts with ``o1``, ``o3``, ``o4`` or ``gpt-5``;
- its effort is the request's ``reasoning_effort`` (chat completions) or ``reasoning.effort``
  (Responses), ``medium`` when the request names none;
- it spends ``REASONING_PER_TOKEN[effort]`` reasoning tokens per token of its visible answer
  (``minimal`` none, ``low`` 2, ``medium`` 4, ``high`` 8), billed as output tokens: the usage's
  output (completion) tokens are the answer's plus the reasoning, and ``reasoning_tokens`` in
  its output details says how many of them were reasoning;
- a token limit (``max_completion_tokens`` / ``max_output_tokens``) covers both: the reasoning
  comes first, the answer gets what is left (cut to it, finish ``length`` / ``incomplete``);
- another model given a reasoning parameter answers 400 ``unsupported_parameter``, as OpenAI's
  API does; so does a Responses ``reasoning`` that is not an object, and an effort not in
  `REASONING_PER_TOKEN`;
- a reasoning model refuses the sampling parameters of `FIXED_ON_REASONING` (``temperature``
  and ``top_p`` but at 1, penalties, ``logprobs``, ``logit_bias``) unless its effort is
  ``none``: "Not Supported: temperature, top_p, presence_penalty, frequency_penalty, logprobs,
  top_logprobs, logit_bias, max_tokens" (learn.microsoft.com/azure/ai-foundry/openai/how-to/
  reasoning, the same models' API; OpenAI's answer: "Unsupported value: 'temperature' does not
  support 0.2 with this model. Only the default (1) value is supported.").
"""

from typing import Any

from emulator.core.tokens import count_tokens

REASONING_MODELS = ("o1", "o3", "o4", "gpt-5")
REASONING_PER_TOKEN = {"none": 0, "minimal": 0, "low": 2, "medium": 4, "high": 8, "xhigh": 16}
#: sampling parameters a reasoning model refuses, with the one value it takes (None: any)
FIXED_ON_REASONING: dict[str, object] = {
    "temperature": 1,
    "top_p": 1,
    "presence_penalty": None,
    "frequency_penalty": None,
    "logprobs": None,
    "top_logprobs": None,
    "logit_bias": None,
}
DEFAULT_EFFORT = "medium"


def is_reasoning_model(model: Any) -> bool:
    return isinstance(model, str) and model.startswith(REASONING_MODELS)


def effort_of(body: dict[str, Any]) -> Any:
    """The effort a request asks for (chat's ``reasoning_effort``, Responses' ``reasoning``)."""
    if "reasoning_effort" in body:
        return body["reasoning_effort"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict):
        return reasoning.get("effort")
    return None


def reasoning_problem(body: dict[str, Any], param: str) -> tuple[str, str] | None:
    """``(message, param)`` of a 400 for a reasoning parameter the request cannot take."""
    given = param in body
    if given and param == "reasoning" and not isinstance(body["reasoning"], dict):
        kind = type(body["reasoning"]).__name__.replace("str", "string")
        return f"Invalid type for 'reasoning': expected an object, but got a {kind} instead.", param
    effort = effort_of(body)
    if given and not is_reasoning_model(body.get("model")):
        message = (
            f"Unsupported parameter: '{param}' is not supported with this model "
            f"({body.get('model')})."
        )
        return message, param
    if given and effort is not None and effort not in REASONING_PER_TOKEN:
        allowed = ", ".join(f"'{e}'" for e in REASONING_PER_TOKEN)
        return f"Invalid value: '{effort}'. Supported values are: {allowed}.", param
    if is_reasoning_model(body.get("model")) and effort != "none":
        return _sampling_problem(body)
    return None


def _sampling_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    for name, default in FIXED_ON_REASONING.items():
        if name not in body or body[name] == default:
            continue
        if default is None:
            return f"Unsupported parameter: '{name}' is not supported with this model.", name
        return (
            f"Unsupported value: '{name}' does not support {body[name]} with this model. Only "
            f"the default ({default}) value is supported.",
            name,
        )
    return None


def reasoning_tokens(body: dict[str, Any], answer_tokens: int) -> int:
    """The reasoning tokens a request spends before an answer of ``answer_tokens``."""
    if not is_reasoning_model(body.get("model")):
        return 0
    effort = effort_of(body) or DEFAULT_EFFORT
    return REASONING_PER_TOKEN.get(str(effort), 0) * answer_tokens


def fast_path_ok(body: dict[str, Any]) -> bool:
    """Whether a chat body spends no reasoning (the batch pass's template has none)."""
    return not is_reasoning_model(body.get("model")) and "reasoning_effort" not in body


def fit_to_limit(text: str, reasoning: int, limit: Any) -> tuple[str, int, bool]:
    """``(answer, reasoning, cut)`` within a token ``limit`` that covers the reasoning first
    and the answer with what is left (``cut``: the answer was shortened)."""
    if not isinstance(limit, int) or limit <= 0:
        return text, reasoning, False
    if reasoning >= limit:
        return "", limit, True
    room = limit - reasoning
    if count_tokens(text) > room:
        return text[: room * 4], reasoning, True
    return text, reasoning, False
