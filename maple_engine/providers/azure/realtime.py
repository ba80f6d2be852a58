"""``--provider azure-openai-realtime``: a deployment's chat completions and embeddings, one
request per row (several rows' texts per embeddings request), through the real-time engine.

The bodies, answers and ``x-ratelimit-*`` headers are OpenAI's (`OpenAIRealtimeProvider`);
the URL names the deployment (``--model``) and carries ``?api-version=``, and the key goes in
an ``api-key`` header (`maple_engine.providers.azure.wire`). On the v1 API
(``AZURE_OPENAI_API_VERSION=v1``) the URL is ``/openai/v1/chat/completions`` (and
``/embeddings``), no query, the deployment in the body's ``model``.
"""

from typing import ClassVar

from pydantic import Field

from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.azure import wire
from maple_engine.providers.base import Dialect, ProviderCapabilities
from maple_engine.providers.openai import params as openai_params
from maple_engine.providers.openai import wire as openai_wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import realtime_capabilities

NAME = "azure-openai-realtime"
CAPABILITIES = realtime_capabilities(
    Dialect.OPENAI,
    "openai",
    wire.CREDENTIALS,
    caching=wire.CACHING,
    kinds=frozenset({CHAT, EMBEDDING}),
    models=openai_wire.MODELS,
    reasoning_models=openai_wire.REASONING_MODELS,
    base_url_env=wire.ENDPOINT_ENV,
    version_env=wire.VERSION_ENV,
    takes_api_version=True,
    rules=openai_params.RULES,
)


class AzureOpenAIRealtimeProvider(OpenAIRealtimeProvider):
    """A deployment's ``POST /openai/deployments/{deployment}/chat/completions`` (and
    ``/embeddings``), ``?api-version=`` on each."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES

    name: str = Field(default=NAME, description="Provider name in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"API key (the code location: {wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description=f"The resource's endpoint, the part before /openai ({wire.ENDPOINT_ENV}).",
    )
    api_version: str = Field(
        default=wire.DEFAULT_API_VERSION,
        description=f"The api-version query of every request, or v1 for the v1 API's paths "
        f"without one ({wire.VERSION_ENV}).",
    )
    model: str | None = Field(
        default=None, description="The deployment in the URL; set from each shard's payload."
    )

    def resolved_base_url(self) -> str:
        if self.api_version == wire.V1:  # the deployment is the body's model
            return wire.control_url(self.base_url, self.api_version)
        return wire.deployment_url(self.base_url, self.model or "")

    def url_of(self, path: str) -> str:
        return wire.with_query(super().url_of(path), self.api_version)

    def auth_headers(self) -> dict[str, str]:
        return wire.key_headers(self.api_key)

    def check_credentials(self) -> None:
        wire.resource_endpoint(self.base_url)
        wire.version_query(self.api_version)
        super().check_credentials()

    def bound_to(self, model: str) -> "AzureOpenAIRealtimeProvider":
        """A copy that names the deployment ``model`` in its URL."""
        return self if self.model == model else self.model_copy(update={"model": model})
