"""``--provider bedrock-openai-realtime``: Bedrock's Runtime chat completions in OpenAI's shape
(https://docs.aws.amazon.com/bedrock/latest/userguide/inference-chat-completions.html), one
request per row; the batch provider's real-time twin, with its key and base URL."""

import dataclasses
from typing import ClassVar

from pydantic import Field

from maple_engine.providers.base import Dialect, ProviderCapabilities
from maple_engine.providers.bedrock_openai import wire
from maple_engine.providers.openai import params
from maple_engine.providers.openai import wire as openai_wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import realtime_capabilities

NAME = "bedrock-openai-realtime"
CAPABILITIES = dataclasses.replace(
    realtime_capabilities(Dialect.OPENAI, "aws", wire.CREDENTIALS, rules=params.RULES),
    price_families=("aws", "openai"),
    api_key_env=wire.KEY_ENV,
    family="bedrock-openai",
    sdk_env=("AWS_REGION",),
)


class BedrockOpenAIRealtimeProvider(OpenAIRealtimeProvider):
    """``POST {runtime}/openai/v1/chat/completions`` with the Bedrock API key as bearer token."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES

    name: str = Field(default=NAME, description="Provider name in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"Bedrock API key ({wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description=f"The Runtime's OpenAI prefix, the part before /chat/completions "
        f"({wire.BASE_URL_ENV}); default: https://bedrock-runtime.{{AWS_REGION}}.amazonaws.com"
        "/openai/v1.",
    )
    region: str | None = Field(default=None, description="AWS region; default: AWS_REGION.")

    def resolved_base_url(self) -> str:
        return (self.base_url or wire.runtime_url(self.region)).rstrip("/")

    def auth_headers(self) -> dict[str, str]:
        return openai_wire.openai_headers(self.api_key, wire.KEY_ENV)
