"""Amazon Titan Text Embeddings V2 on Bedrock: a record's ``modelInput`` ``{"inputText",
"dimensions"?, "normalize"?}`` in, ``{"embedding", "inputTextTokenCount"}`` out.

The vector is the emulator's one embedding function (``embedding_vector``: the same text and
dimension give the same vector through OpenAI's, Gemini's and this route), always unit length;
``dimensions`` is 256, 512 or 1024 (Titan's default, 1024). Faults are drawn as for chat; an
injected fault is the record's ``error`` with the HTTP status Bedrock would report.
"""

from typing import Any

from emulator.core.faults import FaultDrawer
from emulator.core.outcome import Outcome
from emulator.core.replies import embedding_vector
from emulator.core.tokens import count_tokens

TITAN_DIMENSIONS = (256, 512, 1024)
DEFAULT_DIMENSIONS = 1024
_FAULTS = {
    "rate_limited": (429, "Too many requests, please wait before trying again."),
    "insufficient_quota": (429, "Too many tokens, please wait before trying again."),
    "server_error": (500, "The server encountered an internal error, retry."),
    "invalid_request": (400, "Malformed input request: the emulator injected a fault."),
}


def is_titan_embedding(model: str) -> bool:
    """Whether a Bedrock model id names Titan Text Embeddings (the record bodies are Titan's)."""
    return "titan-embed-text" in model


def _error(status: int, message: str) -> Outcome:
    return Outcome(status, {"error": {"message": message}})


def run_titan(drawer: FaultDrawer, model_input: Any, key: int) -> Outcome:
    """The ``modelOutput`` of one Titan embedding record, or its error."""
    text = model_input.get("inputText") if isinstance(model_input, dict) else None
    if not isinstance(text, str) or not text:
        return _error(400, "Malformed input request: #: required key [inputText] not found")
    dims = model_input.get("dimensions", DEFAULT_DIMENSIONS)
    if dims not in TITAN_DIMENSIONS:
        return _error(400, f"Malformed input request: #/dimensions: {dims} is not a valid enum "
                      "value (256, 512, 1024)")  # fmt: skip
    if drawer.active:
        fault = drawer.draw(key, image=False, schema=False)
        if fault in _FAULTS:
            status, message = _FAULTS[fault]
            outcome = _error(status, message)
            outcome.fault = fault
            return outcome
    tokens = count_tokens(text)
    body = {"embedding": embedding_vector(text, dims), "inputTextTokenCount": tokens}
    return Outcome(200, body, tokens, 0, kind="embedding")
