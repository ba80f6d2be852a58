"""The sensor's tick reads a job's state in a few S3 requests however many shards it has.

Counted at the wire: every HTTP request the S3 client sends to moto's server (aiobotocore's
endpoint), while the sensor's real tick runs for a job of 24 shards whose batches have all
been submitted. Read shard by shard, that tick cost about three requests per shard.
"""

from collections import Counter
from pathlib import Path
from typing import Any

import aiobotocore.endpoint
import dagster as dg
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from tests.conftest import BUCKET

SHARDS = 24


@pytest.fixture
def s3_requests(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """HTTP requests sent to S3 by method (counted, then sent for real)."""
    sent: Counter[str] = Counter()
    original = aiobotocore.endpoint.AioEndpoint._send

    async def counting(self: Any, request: Any) -> Any:
        sent[request.method] += 1
        return await original(self, request)

    monkeypatch.setattr(aiobotocore.endpoint.AioEndpoint, "_send", counting)
    return sent


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_tick_reads_state_in_a_few_requests_not_per_shard(
    tmp_path: Path,
    s3: dict[str, str],
    s3_requests: Counter[str],
    emulator_server: EmulatorServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    table = tmp_path / "t.parquet"
    pl.DataFrame({"title": [f"item {i}" for i in range(SHARDS * 2)]}).write_parquet(table)
    en = enrichment(name="wide", source=str(table), prompt="{title}", model="gpt-4o-mini",
                    provider="emulator", max_requests_per_batch=2,
                    max_enqueued_tokens=10**9)  # every shard goes at once  # fmt: skip
    resources = maple_resources([en], storage_root=f"s3://{BUCKET}/root")
    with dg.instance_for_test() as instance:
        runner = Runner(en, resources, instance, quiet=True)
        runner.materialize(en.key("input_shards"))
        submit = [str(r.partition_key) for r in runner.tick()]
        assert len(submit) == SHARDS
        runner.run_ranges(en.key("submissions"), submit)

        s3_requests.clear()
        collect = runner.tick()  # every batch ended: one collect run per 16 shards in order
        collected = [shard for r in collect for shard in runner.shards(r)]
        first = sum(s3_requests.values())
        s3_requests.clear()
        again = runner.tick()  # nothing changed since: served from the listing and the cache
        second = sum(s3_requests.values())

    assert collected == [f"s{n:05d}" for n in range(SHARDS)]
    assert all(":collect:" in str(r.run_key) for r in collect) and len(collect) == 2
    assert [r.run_key for r in again] == [r.run_key for r in collect]
    # Read shard by shard this was 127 requests per tick, every tick. Now: one listing plus one
    # GET per object written since the process last looked (here each shard's new submission),
    # then the listing alone for as long as nothing changes. Beside it, the listing of the
    # provider's pushed batch events (two while none is recorded: s3fs then lists the parent
    # to tell an absent folder from a file) and the model's queue ledger.
    assert first <= SHARDS + 4, s3_requests
    assert second <= 4, s3_requests
