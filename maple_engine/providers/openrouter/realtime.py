"""``--provider openrouter-realtime``: OpenRouter's chat completions
(``POST {base}/chat/completions``, OpenAI's shape, https://openrouter.ai/docs/api-reference/overview),
one request per row; the batch provider's real-time twin, with its key and base URL. Its API takes
images, which the batch API refuses."""

from typing import ClassVar

from pydantic import Field

from maple_engine.providers.base import Dialect, ProviderCapabilities
from maple_engine.providers.openai import params
from maple_engine.providers.openai import wire as openai_wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.openrouter import wire
from maple_engine.providers.realtime import realtime_capabilities

NAME = "openrouter-realtime"
CAPABILITIES = realtime_capabilities(
    Dialect.OPENAI, "openrouter", wire.CREDENTIALS, rules=params.RULES
)


class OpenRouterRealtimeProvider(OpenAIRealtimeProvider):
    """``POST {base}/chat/completions`` with the OpenRouter key as bearer token."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES

    name: str = Field(default=NAME, description="Provider name in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (the code location: OPENROUTER_API_KEY)."
    )
    base_url: str | None = Field(
        default=None,
        description="API base URL, the part before /chat/completions (OPENROUTER_BASE_URL); "
        f"default: {wire.DEFAULT_BASE_URL}.",
    )

    def resolved_base_url(self) -> str:
        return wire.api_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return openai_wire.openai_headers(self.api_key, self.capabilities.variable("api_key"))
