"""A stalled batch's shard under a deadline, against the emulator over HTTP: its next attempt
goes to the flex lane while the time left allows one flex request, else to standard real-time;
the batch's own request bodies go out on the flex tier (``service_tier: "flex"``), so what the
provider bills matches the batch prices the ledger books."""

import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_engine.model import CHAT, batch_priced
from maple_engine.providers.base import ShardPayload
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.send.deadline_lanes import attempt_lane, deadline_lanes, submission_lane
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

ROWS = 6


def body(family: str, i: int) -> dict[str, Any]:
    """A row's request as the batch provider encodes it (the real-time twins take the same)."""
    if family == "openai":
        return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"oats {i}"}]}
    return {"contents": [{"role": "user", "parts": [{"text": f"oats {i}"}]}]}


def payload(family: str, model: str, attempt: int) -> ShardPayload:
    bodies = [orjson.dumps(body(family, i)).decode() for i in range(ROWS)]
    requests = pl.DataFrame({"custom_id": [f"r{i}" for i in range(ROWS)], "request": bodies})
    return ShardPayload("job", "s00000", attempt, model, requests)


def batch_provider(family: str, url: str) -> tuple[Any, str]:
    if family == "openai":
        return OpenAIBatchProvider(api_key="k", base_url=f"{url}/v1"), "gpt-4o-mini"
    return GeminiBatchProvider(api_key="k", base_url=url), "gemini-2.5-flash"


@pytest.mark.parametrize("family", ["openai", "gemini"])
@pytest.mark.parametrize(("hours_left", "lane"), [(1.0, "flex"), (0.1, "realtime")])
def test_a_stalled_shard_tries_flex_first(
    family: str, hours_left: float, lane: str, tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    storage = Storage(str(tmp_path))
    batch, model = batch_provider(family, emulator_server.url)
    lanes = deadline_lanes(batch, storage, "job", 2 * 3600, CHAT)
    started = time.time() - (2 - hours_left) * 3600
    storage.write_json(JobLayout("job").version, {"created_at": started})
    storage.write_json(JobLayout("job").stall_cancel("s00000", 1), {"batch_id": "batch_1"})

    sent = payload(family, model, 2)  # attempt 2 of the shard whose attempt 1 stalled
    sub = attempt_lane(lanes, sent.shard, sent.attempt).submit(sent)
    sender = submission_lane(lanes, sub)
    rows = sender.results(sub, sender.poll([sub])[sub.batch_id])
    stats = emulator_server.stats()

    assert (rows["status"] == "succeeded").all() and rows.height == ROWS
    assert stats["batches_created"] == 0 and stats["requests_billed"] == ROWS
    assert stats["flex_requests"] == (ROWS if lane == "flex" else 0)
    assert batch_priced(sub.batch_id) == (lane == "flex")
