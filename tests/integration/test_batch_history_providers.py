"""The batch history of each REST batch provider's batches, recorded by ``maple enrich``
against the emulator over HTTP: one row per batch, each ended ``completed`` with its times."""

from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.ledger.batch_history import HistoryFilter
from maple_engine.ledger.costs import CostLedger
from tests.integration.test_anthropic_batch import enrich


@pytest.mark.parametrize(
    ("provider", "model", "variable"),
    [
        ("anthropic", "claude-haiku-4-5", "ANTHROPIC"),
        ("gemini", "gemini-2.5-flash", "GEMINI"),
    ],
)
def test_each_batch_is_recorded_with_its_phases(
    provider: str, model: str, variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(12)]}).write_parquet(source)
    with EmulatorServer(EmulatorConfig(batch_seconds=1.0)) as server:
        monkeypatch.setenv(f"{variable}_BASE_URL", server.url)
        monkeypatch.setenv(f"{variable}_API_KEY", "test-key")
        store = tmp_path / "store"
        enrich(source, tmp_path / "out.parquet", store, provider, model,
               "--max-requests-per-batch", "4", "--team", "ops")  # fmt: skip
        created = server.stats()["batches_created"]
    with CostLedger(storage_root=str(store)) as ledger:
        history = ledger.batch_history(HistoryFilter(provider=provider))
    assert history.height == created == 3
    assert set(history["status"]) == {"completed"} and set(history["team"]) == {"ops"}
    assert set(history["model"]) == {model} and history["requests"].sum() == 12
    assert (history["ended_at"] >= history["created_at"]).all()
    assert history["duration_s"].is_not_null().all()
    assert (history["prompt_tokens"] > 0).all()
