"""A control call that retries says so: one line when the episode starts (what, since when,
tries, next try), in the Dagster run's log and on ``maple``'s stderr; never the key."""

import logging

import dagster as dg
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.errors import engine_warnings_on_stderr
from maple_assets.graph.engine_log import engine_log_to
from maple_engine.errors import ProviderError
from maple_engine.providers.http import make_client, request

WHAT = "create batch for job j shard s00001"


def failing_create(url: str) -> None:
    client = make_client(f"{url}/v1", {"Authorization": "Bearer sk-secret-key"}, 10.0)
    with client, pytest.raises(ProviderError, match="answered 500"):
        request(client, "POST", "/batches", what=WHAT, max_retries=3, json={})


def test_a_retrying_call_logs_one_line_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    with (
        EmulatorServer(EmulatorConfig(control_fail=1.0)) as server,
        caplog.at_level(logging.WARNING, logger="maple"),
    ):
        failing_create(server.url)
        assert server.stats()["control_500"] == 4  # the first try and 3 retries
    lines = [r.getMessage() for r in caplog.records if r.name == "maple.provider"]
    assert len(lines) == 1, lines  # 3 retries within 30 s: one line
    assert f"{WHAT}: POST /batches answered 500 since " in lines[0]
    assert "1 tries, next try in" in lines[0]
    assert "sk-secret-key" not in lines[0]


def test_the_dagster_run_shows_the_retrying_call() -> None:
    with EmulatorServer(EmulatorConfig(control_fail=1.0)) as server:

        @dg.asset
        def calls_provider(context: dg.AssetExecutionContext) -> None:
            with engine_log_to(context.log):
                failing_create(server.url)

        with dg.instance_for_test() as instance:
            result = dg.materialize([calls_provider], instance=instance)
            messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any("provider call retrying: " + WHAT in m for m in messages), messages


def test_maple_prints_the_engine_warnings_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with engine_warnings_on_stderr():
        logging.getLogger("maple.provider").warning("provider call retrying: list batches")
    logging.getLogger("maple.provider").warning("after the job: not printed")
    assert capsys.readouterr().err == "maple: provider call retrying: list batches\n"
