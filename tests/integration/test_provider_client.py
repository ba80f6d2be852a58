"""A batch provider resource keeps one HTTP client for its life: made on first use, reused by
every call (connections too), closed when Dagster tears the resource down, or when a provider
used outside Dagster is garbage-collected."""

import gc

import dagster as dg

from emulator.server import EmulatorServer
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from resources.providers import provider_resource


def test_one_client_per_resource_closed_at_teardown(emulator_server: EmulatorServer) -> None:
    provider = OpenAIBatchProvider(api_key="sk-test", base_url=f"{emulator_server.url}/v1")
    with dg.build_resources({"provider": provider_resource(provider)}) as resources:
        live = resources.provider
        assert live.find_orphans("nothing") == []  # a real list call
        with live._client() as first, live._client() as second:
            assert first is second and not first.is_closed
        assert live.find_orphans("nothing") == []
        with live._client() as again:
            assert again is first  # the same client (and pool) for the second call
    assert first.is_closed  # Dagster's teardown closed it


def test_a_provider_used_outside_dagster_closes_its_client_when_collected(
    emulator_server: EmulatorServer,
) -> None:
    for cls, base in (
        (OpenAIBatchProvider, f"{emulator_server.url}/v1"),
        (AnthropicBatchProvider, emulator_server.url),
        (GeminiBatchProvider, emulator_server.url),
    ):
        provider = cls(api_key="k", base_url=base)
        with provider._client() as client:
            assert not client.is_closed
        del provider
        gc.collect()
        assert client.is_closed, cls.__name__
