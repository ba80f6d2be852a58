"""The enrichment sensor with pushed batch events, through Dagster's own tick machinery: between
its polls it calls the provider only for a batch whose genuine event was recorded, and then
asks for that batch's collect run at once; a forged event changes nothing."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import httpx
import orjson
import pytest
import uvicorn

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.webhooks import build_app, receivers
from maple_assets.graph.sensor_cursor import only_polled_at
from maple_engine.settings import Settings
from maple_engine.state import JobState
from maple_engine.storage.batch_events import BatchEvents
from maple_engine.storage.storage import Storage
from tests.e2e.webhook_server import SECRET, delivery
from tests.integration.test_graph import run_graph
from tests.integration.test_sensor_cursor import small_job, tick


@contextmanager
def webhooks_server(root: Path) -> Iterator[str]:
    """`maple webhooks`' app on a free port of 127.0.0.1, on a thread: OpenAI's path's URL."""
    settings = Settings(storage_root=str(root), provider_api={"OPENAI_WEBHOOK_SECRET": SECRET})
    app = build_app(receivers(settings, Storage(str(root))))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/webhooks/openai"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _polls(server: EmulatorServer) -> int:
    stats = server.stats()
    return int(stats["batch_retrievals"] + stats["batch_list_pages"])


@pytest.mark.slow
def test_the_sensor_polls_between_intervals_only_for_pushed_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    with webhooks_server(root) as hook:
        config = EmulatorConfig(batch_seconds=2.0, webhook_url=hook, webhook_secret=SECRET)
        with EmulatorServer(config) as server, dg.instance_for_test() as instance:
            monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
            en, resources = small_job(tmp_path, "pushed")
            assets = [*en.assets, *en.checks]
            dg.materialize(assets, selection=[en.key("input_shards")], instance=instance,
                           resources=resources)  # fmt: skip
            first = tick(en, instance, resources, None)  # polls, and asks to submit the shard
            (submit,) = first.run_requests or []
            dg.materialize(assets, selection=submit.asset_selection, instance=instance,
                           partition_key=submit.partition_key, resources=resources)  # fmt: skip
            before = _polls(server)
            quiet = tick(en, instance, resources, first.cursor)
            forged = delivery("batch_x", "wh_forged", secret="whsec_QUJDREVGR0hJSktMTU5PUA==")
            refused = httpx.post(hook, content=forged[0], headers=forged[1]).status_code
            still = tick(en, instance, resources, quiet.cursor)
            assert (quiet.run_requests, still.run_requests, refused) == ([], [], 400)
            assert _polls(server) == before  # no event, no provider call
            deadline = time.monotonic() + 15
            while not server.stats()["webhooks_sent"] and time.monotonic() < deadline:
                time.sleep(0.1)
            pushed = tick(en, instance, resources, still.cursor)
            after = _polls(server)
    (collect,) = pushed.run_requests or []
    assert collect.asset_selection == [en.key("raw_responses")] and ":collect:" in str(
        collect.run_key
    )
    assert after > before
    assert not list((root / "_webhooks/openai/events").iterdir())  # consumed by that poll


@pytest.mark.slow
def test_an_event_of_a_batch_already_collected_is_consumed_without_a_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as server, dg.instance_for_test() as i:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
        en, resources = small_job(tmp_path, "late")
        run_graph(en, [], resources, i)  # polled, collected and merged without any event
        (batch,) = [s.batch_id for s in JobState(Storage(str(tmp_path / "store")), "late")
                    .submissions("s00000")]  # fmt: skip
        events = BatchEvents(Storage(str(tmp_path / "store")), "openai")
        assert events.record("wh_late", batch, "batch.completed")
        before = _polls(server)
        cursor = only_polled_at(orjson.dumps({"polled_at": time.time()}).decode())
        late = tick(en, i, resources, cursor)
        after = _polls(server)
    assert not [r for r in late.run_requests or [] if ":collect:" in str(r.run_key)]
    assert after == before and events.waiting() == set()
