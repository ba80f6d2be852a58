"""Azure OpenAI's wire: where its calls go and how they authenticate. The request bodies, the
batch lines and the answers are OpenAI's (`maple_engine.providers.openai.wire`); what differs
is here.

- The resource's endpoint (``AZURE_OPENAI_ENDPOINT``, ``https://NAME.openai.azure.com``: the
  host part before ``/openai``) prefixes every path: ``/openai/files`` and ``/openai/batches``
  for batches, ``/openai/deployments/{deployment}/chat/completions`` (and ``/embeddings``) in
  real time. ``--model`` names the deployment; a batch line names it in ``body.model``.
- The key goes in an ``api-key`` header (``AZURE_OPENAI_API_KEY``), not a bearer token.
- Every call carries ``?api-version=`` (``AZURE_OPENAI_API_VERSION``, default
  `DEFAULT_API_VERSION`, the latest generally available version of both the inference API
  and the authoring API that serves files and batches).
"""

import re
import urllib.parse

from maple_engine.errors import ConfigError
from maple_engine.providers.base import PromptCaching

CREDENTIALS = "azure_openai"  # AZURE_OPENAI_API_KEY
ENDPOINT_ENV = "AZURE_OPENAI_ENDPOINT"
KEY_ENV = "AZURE_OPENAI_API_KEY"
VERSION_ENV = "AZURE_OPENAI_API_VERSION"
DEFAULT_API_VERSION = "2024-10-21"
# A dated version, generally available or a preview: 2024-10-21, 2025-04-01-preview.
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")
#: Azure caches a prompt prefix of 1,024+ tokens on its own, in 128-token steps; no cache hint
#: is sent (``prompt_cache_key`` is not in every API version).
CACHING = PromptCaching(hint="implicit", default_minimum=1024, step_tokens=128, ttl_s=300)
#: Global Batch: the requests of one input file (its bytes: OpenAI's 200 MB).
MAX_REQUESTS_PER_FILE = 100_000


def resource_endpoint(endpoint: str | None) -> str:
    """The resource's endpoint without a trailing slash (or ``/openai``, pasted with it); a
    `ConfigError` naming the variable without one."""
    if not endpoint:
        raise ConfigError(
            f"{ENDPOINT_ENV} is not set: export your resource's endpoint (e.g. "
            "https://NAME.openai.azure.com, the part before /openai), or pass base_url to the "
            "provider."
        )
    return endpoint.rstrip("/").removesuffix("/openai")


def control_url(endpoint: str | None) -> str:
    """The prefix of the files and batches paths: ``{endpoint}/openai``."""
    return f"{resource_endpoint(endpoint)}/openai"


def deployment_url(endpoint: str | None, deployment: str) -> str:
    """The prefix of a deployment's real-time paths: ``{endpoint}/openai/deployments/{name}``."""
    return f"{control_url(endpoint)}/deployments/{urllib.parse.quote(deployment, safe='')}"


def key_headers(api_key: str | None) -> dict[str, str]:
    """The ``api-key`` header; a `ConfigError` naming the variable without a key."""
    if not api_key:
        raise ConfigError(
            f"{KEY_ENV} is not set: export your resource's key (or pass api_key to the "
            "provider resource)."
        )
    return {"api-key": api_key}


def version_query(api_version: str) -> dict[str, str]:
    """The ``api-version`` query every call carries; a `ConfigError` for a value that is not
    a dated API version."""
    if not _VERSION.fullmatch(api_version):
        raise ConfigError(
            f"{VERSION_ENV}={api_version!r} is not an Azure OpenAI API version: give a date such "
            f"as {DEFAULT_API_VERSION} (the default) or 2025-04-01-preview."
        )
    return {"api-version": api_version}


def with_query(url: str, api_version: str) -> str:
    """``url`` with the ``api-version`` query."""
    return f"{url}?{urllib.parse.urlencode(version_query(api_version))}"
