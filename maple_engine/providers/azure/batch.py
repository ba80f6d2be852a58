"""``--provider azure-openai``: Azure OpenAI Global Batch, run by the OpenAI batch provider.

The files, batches, JSONL lines and answers are OpenAI's; Azure's URLs, ``api-key`` header and
``api-version`` query are `maple_engine.providers.azure.wire`. What Azure documents differently
is data in `CAPABILITIES`: 100,000 requests and 200 MB per file; the 24-hour window is a target,
and a batch that takes longer is not expired (``windows_expire=False``); the enqueued-token quota
is per deployment (``queue_scope="deployment"``); prices are OpenAI's models' (a deployment named
after its model prices; another needs ``MAPLE_PRICES`` or ``--allow-untracked-cost``).
Embeddings on the v1 API only: its batch create takes ``/v1/embeddings`` beside
``/v1/chat/completions`` (https://learn.microsoft.com/en-us/azure/foundry/reference/rest/batches-create-batch),
while the dated API's batch documentation names chat deployments and ``/chat/completions`` lines
only; an embedding job on the dated API is refused before upload, pointing at
``AZURE_OPENAI_API_VERSION=v1`` and ``azure-openai-realtime``.
"""

import dataclasses
from typing import ClassVar

import polars as pl
from pydantic import Field

from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.azure import wire
from maple_engine.providers.base import BATCH_FILE_LIMITS, ProviderCapabilities, RequestSpec
from maple_engine.providers.openai.batch import CAPABILITIES as OPENAI
from maple_engine.providers.openai.batch import OpenAIBatchProvider

NAME = "azure-openai"
CAPABILITIES = dataclasses.replace(
    OPENAI,
    limits=dataclasses.replace(BATCH_FILE_LIMITS, max_requests=wire.MAX_REQUESTS_PER_FILE),
    price_families=("openai",),
    kinds=frozenset({CHAT, EMBEDDING}),  # embeddings on the v1 API only (the module's doc)
    realtime_twin="azure-openai-realtime",
    flex_twin=None,
    priority_twin=None,  # OpenAI's priority tier is not Azure's API (it takes no api_version)
    endpoints=frozenset({"chat"}),
    credentials=wire.CREDENTIALS,
    base_url_env=wire.ENDPOINT_ENV,
    version_env=wire.VERSION_ENV,
    takes_api_version=True,
    completion_windows=("24h",),
    attribution=None,  # Azure OpenAI has no projects: its resource is the account
    windows_expire=False,
    queue_scope="deployment",
    billing_report=None,
    caching=wire.CACHING,
    results_retention_s=None,  # not OpenAI's 30 days: Azure's batch docs state none
    files=None,  # OpenAI's file parts are not documented for Azure's batches
    webhooks=None,  # OpenAI's project webhooks are not Azure's
)


class AzureOpenAIBatchProvider(OpenAIBatchProvider):
    """Azure OpenAI Global Batch: ``{endpoint}/openai/files`` and ``/openai/batches``, lines to
    ``/chat/completions`` naming the deployment in ``body.model`` (on the v1 API:
    ``/openai/v1/files`` and ``/openai/v1/batches``, lines to ``/v1/chat/completions``)."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES
    default_base_url: ClassVar[str | None] = None

    name: str = Field(default=NAME, description="Provider name recorded in costs and output.")
    api_key: str | None = Field(
        default=None, repr=False, description=f"API key (the code location: {wire.KEY_ENV})."
    )
    base_url: str | None = Field(
        default=None,
        description=f"The resource's endpoint, the part before /openai ({wire.ENDPOINT_ENV}).",
    )
    api_version: str = Field(
        default=wire.DEFAULT_API_VERSION,
        description=f"The api-version query of every call, or v1 for the v1 API's paths "
        f"without one ({wire.VERSION_ENV}).",
    )
    endpoint: str = Field(default="/chat/completions", description="Batch endpoint (chat).")
    max_requests: int = Field(
        default=CAPABILITIES.limits.max_requests, description="Provider limit: requests per file."
    )
    max_bytes: int = Field(
        default=CAPABILITIES.limits.max_bytes, description="Provider limit: bytes per file."
    )

    def resolved_base_url(self) -> str:
        return wire.control_url(self.base_url, self.api_version)

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        if spec.kind == EMBEDDING and self.api_version != wire.V1:
            raise ConfigError(
                f"--provider {self.name} batches embeddings on Azure's v1 API only (api-version "
                f"{self.api_version}'s batches take chat lines): set {wire.VERSION_ENV}=v1, or "
                "embed with --provider azure-openai-realtime."
            )
        return super().body_expr(spec, user, image, files)

    def _endpoint(self, requests: pl.DataFrame | None) -> str:
        return wire.batch_endpoint(super()._endpoint(requests), self.api_version)

    def _line_prefix(self, endpoint: str) -> tuple[str, str]:
        return super()._line_prefix(wire.batch_endpoint(endpoint, self.api_version))

    def auth_headers(self) -> dict[str, str]:
        return wire.key_headers(self.api_key)

    def query_params(self) -> dict[str, str]:
        return wire.version_query(self.api_version)

    def check_credentials(self) -> None:
        self.query_params()
        super().check_credentials()
