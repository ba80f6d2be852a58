"""What running one request body gives every provider's engine: an ``Outcome`` (status, body,
tokens, fault class), and the emulator's readable object ids."""

import itertools
from dataclasses import dataclass
from typing import Any

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A unique, readable object id such as ``chatcmpl-emu00000000002a``."""
    return f"{prefix}emu{next(_ids):012x}"


#: The counter of each kind's billed work, beside ``requests_billed`` (which counts both).
BILLED_BY_KIND = {"chat": "chat_requests_billed", "embedding": "embedding_inputs_billed"}


@dataclass(slots=True)
class Outcome:
    """Result of running one request body: HTTP status, JSON body, token usage, fault class."""

    status: int
    body: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fault: str | None = None
    units: int = 1  # what ``requests_billed`` counts for a 200: one per input text embedded
    #: what a 200 bills: a chat request (``chat``) or ``units`` embedding inputs (``embedding``)
    kind: str = "chat"
    file_parts: int = 0  # the files the request carried (``file_parts`` in the stats)
