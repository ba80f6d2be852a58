"""A batch's results are downloaded from where the poll just saw them (OpenAI's output and error
file ids, Anthropic's ``results_url``), without fetching the batch once more; a state that does
not say where they are (an older state, a provider whose poll does not carry them) fetches it."""

import dataclasses
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.model import BatchState, Submission
from maple_engine.providers.base import RequestSpec, ShardPayload
from tests.conftest import env_provider

ROWS = 3


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as running:
        for family, path in (("OPENAI", "/v1"), ("ANTHROPIC", "")):
            monkeypatch.setenv(f"{family}_BASE_URL", running.url + path)
            monkeypatch.setenv(f"{family}_API_KEY", "test-key")
        yield running


def _ended(provider: Any, model: str) -> tuple[Submission, BatchState]:
    spec = RequestSpec(model, params={"max_tokens": 16})
    frame = pl.DataFrame({"t": [f"text {i}" for i in range(ROWS)]})
    requests = frame.select(
        pl.format("r{}", pl.int_range(ROWS)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    sub = provider.submit(ShardPayload("job", "s00000", 1, model, requests))
    while not (state := provider.poll([sub])[sub.batch_id]).ended:
        pass
    return sub, state


def _gets(server: EmulatorServer) -> int:
    return int(server.stats()["batch_retrievals"])


@pytest.mark.parametrize(
    ("name", "model", "where"),
    [("openai", "gpt-4o-mini", "output_file_id"), ("anthropic", "claude-haiku-4-5", "results_url")],
)
def test_the_download_reads_where_the_poll_saw_the_results(
    server: EmulatorServer, tmp_path: Any, name: str, model: str, where: str
) -> None:
    provider = env_provider(name, **({"intent_root": str(tmp_path)} if name == "anthropic" else {}))
    sub, state = _ended(provider, model)
    assert where in dict(state.results_at)
    before = _gets(server)
    rows = provider.results(sub, state)
    assert _gets(server) == before  # no GET of the batch between the poll and the download
    assert sorted(rows["custom_id"].to_list()) == [f"r{i}" for i in range(ROWS)]
    # a state that does not say where the results are fetches the batch, with the same rows
    unknown = dataclasses.replace(state, results_at=())
    again = provider.results(sub, unknown)
    assert _gets(server) == before + 1
    assert again.sort("custom_id").equals(rows.sort("custom_id"))
