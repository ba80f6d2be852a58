"""``--provider mistral-realtime``: Mistral's ``POST /v1/chat/completions``, one request per
row, or ``POST /v1/embeddings``, several rows' texts per request, through the real-time engine.

The chat bodies and every answer are OpenAI's (`OpenAIRealtimeProvider`), the embeddings
body Mistral's (`wire.body_expr`); the host is Mistral's
(``MISTRAL_BASE_URL``, the part before ``/v1``) and the key ``MISTRAL_API_KEY``. Mistral
documents no per-request and per-token limit headers in OpenAI's names: where an answer sends
none, the pacing learns the limits from 429s and their ``retry-after``.
"""

from typing import ClassVar

import polars as pl
from pydantic import Field

from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.mistral import wire
from maple_engine.providers.openai import params as openai_params
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import realtime_capabilities

NAME = "mistral-realtime"
CAPABILITIES = realtime_capabilities(
    Dialect.OPENAI,
    "mistral",
    wire.CREDENTIALS,
    kinds=frozenset({CHAT, EMBEDDING}),
    models=wire.MODELS,
    rules=openai_params.RULES,
)


class MistralRealtimeProvider(OpenAIRealtimeProvider):
    """Mistral's chat completions at ``{host}/v1/chat/completions``."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES

    name: str = Field(default=NAME, description="Provider name in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"API key (the code location: {wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description="The API's host, the part before /v1 (MISTRAL_BASE_URL); default: "
        f"{wire.DEFAULT_BASE_URL}.",
    )

    def resolved_base_url(self) -> str:
        return wire.api_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return wire.bearer(self.api_key)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        return wire.body_expr(spec, user, image)
