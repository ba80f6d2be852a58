"""Headers a gateway requires, from the Python API (``headers=``) and ``maple_job``'s config
(a value may be ``{"env": "VAR"}``, so the secret stays out of the run config Dagster stores),
against the emulator acting as that gateway over HTTP."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

import maple_assets
from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

HEADER = "x-gateway-key"
SECRET = "gw-secret-api-41d2"
ROWS = 6


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    """The emulator requiring ``HEADER``, found through MAPLE_EMULATOR_URL."""
    config = EmulatorConfig(batch_seconds=0, control_fail=0, required_headers=(HEADER,))
    server = EmulatorServer(config).start()
    monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "store"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    yield server
    server.stop()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_csv(path)
    return path


def test_the_api_sends_the_headers_and_without_them_is_a_setup_error(
    table: Path, gateway: EmulatorServer
) -> None:
    options = {"prompt": "About {title}", "model": "gpt-4o-mini", "provider": "emulator",
               "job": "api-headers", "poll_interval": 0.1}  # fmt: skip
    with pytest.raises(maple_assets.UsageError, match=f"The {HEADER} header is required"):
        maple_assets.enrich(str(table), **options)  # type: ignore[arg-type]
    assert gateway.stats()["files_uploaded"] == 0
    done = maple_assets.enrich(str(table), headers={HEADER: SECRET}, **options)  # type: ignore[arg-type]
    assert (done.status, done.succeeded, done.sent) == ("succeeded", ROWS, ROWS)
    assert gateway.stats()["requests_billed"] == ROWS


def test_maple_job_takes_a_header_value_from_the_environment(
    table: Path, gateway: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KEY", SECRET)
    instance = dg.DagsterInstance.ephemeral()
    config = {"input": str(table), "prompt": "About {title}", "model": "gpt-4o-mini",
              "provider": "emulator", "job": "rpc-headers",
              "headers": {HEADER: {"env": "GATEWAY_KEY"}}}  # fmt: skip
    done = maple_assets.maple_job().execute_in_process(
        run_config={"ops": {"enrich": {"config": config}}}, instance=instance
    )
    assert done.success
    assert gateway.stats()["requests_billed"] == ROWS
    run = instance.get_run_by_id(done.run_id)
    assert run is not None and SECRET not in repr(run.run_config) + repr(run.tags)
