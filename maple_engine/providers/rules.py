"""What a provider's API refuses in a job's settings, described by the provider itself.

A provider's `ProviderCapabilities.rules` is a `RequestRules`: the check of a chat job's model
parameters (``check_params``) and the JSON-schema subset of its structured-output API
(``schema``). The pre-flight (``maple_engine.inputs``) runs the checks every provider shares and
asks these for the rest, before anything is uploaded: a request the API refuses fails every row
at the provider, after the upload, and each refused row may be billed for its attempt.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from maple_engine.providers.schema_subset import SchemaSubset

#: The APIs a chat job may send to (``--endpoint``), as errors name them.
API_NAMES = {"chat": "chat completions", "responses": "the Responses API"}


@dataclasses.dataclass(frozen=True)
class ChatParams:
    """What a chat job asks of its provider's API: the model, the API (``--endpoint``: ``chat``
    or ``responses``) and the ``--param`` values, with the provider's reasoning models
    (`ProviderCapabilities.reasoning_models`)."""

    model: str
    endpoint: str
    params: Mapping[str, Any]
    reasoning_models: tuple[str, ...] = ()


def takes_any(asked: ChatParams) -> None:
    """No rule on the parameters: the API answers any it refuses per row."""


@dataclasses.dataclass(frozen=True)
class RequestRules:
    """A provider API's rules on a job's settings.

    ``label`` names its structured-output API in errors ("the OpenAI structured-output API
    rejects it"); ``check_params`` raises `ConfigError` for a parameter the API (or the model)
    would refuse; ``schema`` is the JSON-schema subset of its structured outputs (None: any
    object schema); ``reasoning_params`` are the parameters that make its models reason (the
    cost estimate says their tokens cannot be foreseen)."""

    label: str = "provider's"
    check_params: Callable[[ChatParams], None] = takes_any
    schema: SchemaSubset | None = None
    reasoning_params: tuple[str, ...] = ()


#: The rules of a provider that describes none: every object schema and every parameter pass.
NO_RULES = RequestRules()
