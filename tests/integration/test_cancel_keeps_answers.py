"""A job cancelled while its batch runs keeps the rows the batch answered before the cancel:
they are merged, paid once, and not sent again when the job is resumed (the Python API
in-process against the emulator over HTTP)."""

import time
from pathlib import Path

import polars as pl
import pytest

import maple_assets
from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

ROWS = 200
BATCH_SECONDS = 2.0


@pytest.mark.slow  # about 12 s (two drives of the job): the long pass
def test_a_cancelled_job_keeps_what_its_batch_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_csv(table)
    output = str(tmp_path / "out.parquet")
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "store"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    job = {"prompt": "Name {title}", "model": "gpt-4o-mini", "provider": "emulator"}
    config = EmulatorConfig(batch_seconds=BATCH_SECONDS, control_fail=0.0)
    with EmulatorServer(config) as server:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
        handle = maple_assets.submit(str(table), **job, job="cut", output=output, poll_interval=0.1)
        while server.stats()["batches_created"] == 0:
            time.sleep(0.02)
        time.sleep(0.6 * BATCH_SECONDS)  # the batch runs its requests from 0.1 to 0.9 of it
        handle.cancel()
        stopped = handle.wait(timeout=60)
        billed_at_cancel = server.stats()["requests_billed"]
        kept = pl.read_parquet(output)

        server.config.batch_seconds = 0.1  # the resumed job's batch ends at once
        resumed = maple_assets.enrich(str(table), **job, job="cut", output=output)
        stats = server.stats()
    assert stopped.status == "stopped" and stopped.stopped and "cancel" in stopped.stopped
    answered = stopped.succeeded
    assert 0 < answered < ROWS  # some ran before the cancel, some did not
    assert stopped.failed_by_class == {"expired": ROWS - answered}  # never ran: resent
    assert billed_at_cancel == answered  # paid for exactly what the cancelled batch answered
    ok = kept.filter(pl.col("llm_status") == "succeeded")
    assert ok.height == answered and ok["llm_response"].str.starts_with("echo: Name item").all()

    assert resumed.status == "succeeded" and resumed.succeeded == ROWS
    assert resumed.sent == ROWS - answered  # only the rows the cancel stopped go out again
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    final = pl.read_parquet(output)
    assert final["llm_status"].unique().to_list() == ["succeeded"]
    kept_rows = final.join(ok.select("title"), on="title", how="semi")
    assert kept_rows["llm_attempts"].unique().to_list() == [1]  # not sent again
