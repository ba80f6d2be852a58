"""Azure OpenAI's wire: the URLs its calls go to (the resource's endpoint, ``/openai``, the
deployment in a real-time URL, ``?api-version=`` on every call), the ``api-key`` header, the
settings' variables, and what its capabilities say that OpenAI's do not."""

import pytest

from maple_assets.provider_settings import provider_settings
from maple_engine.errors import ConfigError
from maple_engine.providers.azure import wire
from maple_engine.providers.registry import build_provider, capabilities
from maple_engine.settings import Settings

ENDPOINT = "https://res.openai.azure.com"


@pytest.mark.parametrize("given", [ENDPOINT, f"{ENDPOINT}/", f"{ENDPOINT}/openai/"])
def test_the_control_prefix_is_the_endpoint_and_openai(given: str) -> None:
    assert wire.control_url(given) == f"{ENDPOINT}/openai"


def test_a_deployment_is_named_in_the_real_time_url_with_the_version_in_its_query() -> None:
    provider = build_provider(
        "azure-openai-realtime", base_url=ENDPOINT, api_key="k", storage_root="/tmp/unused"
    ).bound_to("team gpt/4o")
    assert provider.url_of("/chat/completions") == (
        f"{ENDPOINT}/openai/deployments/team%20gpt%2F4o/chat/completions?api-version=2024-10-21"
    )
    assert provider.url_of("/embeddings").endswith("/embeddings?api-version=2024-10-21")
    assert provider.request_headers() == {"api-key": "k"}


def test_every_batch_call_carries_the_key_header_and_the_version_query() -> None:
    provider = build_provider(
        "azure-openai", base_url=ENDPOINT, api_key="k", api_version="2025-04-01-preview"
    )
    with provider._new_client() as client:
        built = [
            client.build_request("GET", "/batches", params={"limit": 1}),
            client.build_request("GET", "/files/file-1/content"),
        ]
    assert [str(r.url) for r in built] == [
        f"{ENDPOINT}/openai/batches?api-version=2025-04-01-preview&limit=1",
        f"{ENDPOINT}/openai/files/file-1/content?api-version=2025-04-01-preview",
    ]
    assert {r.headers["api-key"] for r in built} == {"k"}
    assert all("authorization" not in r.headers for r in built)


def test_batch_lines_go_to_chat_completions_naming_the_deployment() -> None:
    provider = build_provider("azure-openai", base_url=ENDPOINT, api_key="k")
    assert provider._line_prefix(provider._endpoint(None))[1].startswith(
        ',"method":"POST","url":"/chat/completions"'
    )


def test_on_the_v1_api_files_batches_and_lines_take_the_v1_paths_and_no_version() -> None:
    provider = build_provider("azure-openai", base_url=ENDPOINT, api_key="k", api_version="v1")
    with provider._new_client() as client:
        built = client.build_request("GET", "/batches", params={"limit": 1})
    assert str(built.url) == f"{ENDPOINT}/openai/v1/batches?limit=1"
    assert built.headers["api-key"] == "k"
    assert provider._endpoint(None) == "/v1/chat/completions"
    assert provider._line_prefix(provider._endpoint(None))[1].startswith(
        ',"method":"POST","url":"/v1/chat/completions"'
    )
    realtime = build_provider(
        "azure-openai-realtime", base_url=ENDPOINT, api_key="k", api_version="v1"
    ).bound_to("team-4o")
    assert realtime.url_of("/chat/completions") == f"{ENDPOINT}/openai/v1/chat/completions"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"api_key": "k"}, "AZURE_OPENAI_ENDPOINT is not set"),
        ({"base_url": ENDPOINT}, "AZURE_OPENAI_API_KEY is not set"),
        ({"base_url": ENDPOINT, "api_key": "k", "api_version": "latest"},
         "AZURE_OPENAI_API_VERSION='latest' is not an Azure OpenAI API version"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("name", ["azure-openai", "azure-openai-realtime"])
def test_a_missing_setting_names_its_variable(name: str, fields: dict[str, str], says: str) -> None:
    provider = build_provider(name, storage_root="/tmp/unused", **fields)
    with pytest.raises(ConfigError, match=says):
        provider.check_credentials()


def test_the_settings_come_from_azures_own_variable_names() -> None:
    settings = Settings(
        provider_api={
            "AZURE_OPENAI_ENDPOINT": ENDPOINT,
            "AZURE_OPENAI_API_KEY": "k",
            "AZURE_OPENAI_API_VERSION": "2025-04-01-preview",
        }
    )
    for name in ("azure-openai", "azure-openai-realtime"):
        found = provider_settings(name, settings)
        assert found == {"base_url": ENDPOINT, "api_key": "k", "api_version": "2025-04-01-preview"}
    caps = capabilities("azure-openai")
    assert [caps.variable(s) for s in ("api_key", "base_url", "version")] == [
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_OPENAI_API_VERSION",
    ]


def test_azure_batches_do_not_expire_and_queue_per_deployment_at_openais_prices() -> None:
    azure, openai = capabilities("azure-openai"), capabilities("openai")
    assert (azure.windows_expire, openai.windows_expire) == (False, True)
    assert (azure.queue_scope, openai.queue_scope) == ("deployment", "model")
    assert azure.queue == openai.queue == "enqueued-tokens"
    assert azure.price_families == ("openai",) and azure.limits.max_requests == 100_000
    assert azure.realtime_twin == "azure-openai-realtime"
