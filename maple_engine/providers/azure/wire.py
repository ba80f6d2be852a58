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
- ``AZURE_OPENAI_API_VERSION=v1`` (or the ``api_version`` setting) speaks the v1 API instead
  (https://learn.microsoft.com/azure/foundry/openai/api-version-lifecycle, which newer models
  require): ``/openai/v1/files`` and ``/openai/v1/batches``, batch lines and the batch's
  ``endpoint`` naming ``/v1/chat/completions``
  (https://learn.microsoft.com/azure/foundry/reference/rest/batches-create-batch), and
  ``/openai/v1/chat/completions`` and ``/embeddings`` in real time with the deployment in the
  body's ``model``; no call carries an ``api-version`` (Azure refuses one on a v1 path).
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
V1 = "v1"  # the versionless v1 API
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


def control_url(endpoint: str | None, api_version: str = DEFAULT_API_VERSION) -> str:
    """The prefix of the files and batches paths: ``{endpoint}/openai``, or
    ``{endpoint}/openai/v1`` on the v1 API."""
    v1 = "/v1" if api_version == V1 else ""
    return f"{resource_endpoint(endpoint)}/openai{v1}"


def batch_endpoint(endpoint: str, api_version: str) -> str:
    """A batch's ``endpoint`` (and its lines' ``url``) on ``api_version``: the dated paths'
    ``/chat/completions``, OpenAI's ``/v1/chat/completions`` on the v1 API."""
    if api_version == V1 and not endpoint.startswith("/v1/"):
        return f"/v1{endpoint}"
    return endpoint


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
    """The ``api-version`` query every call carries (none on the v1 API); a `ConfigError` for
    a value that is neither ``v1`` nor a dated API version."""
    if api_version == V1:
        return {}
    if not _VERSION.fullmatch(api_version):
        raise ConfigError(
            f"{VERSION_ENV}={api_version!r} is not an Azure OpenAI API version: give {V1} (the "
            f"v1 API), a date such as {DEFAULT_API_VERSION} (the default) or 2025-04-01-preview."
        )
    return {"api-version": api_version}


def with_query(url: str, api_version: str) -> str:
    """``url`` with the ``api-version`` query (as it is on the v1 API)."""
    query = version_query(api_version)
    return f"{url}?{urllib.parse.urlencode(query)}" if query else url
