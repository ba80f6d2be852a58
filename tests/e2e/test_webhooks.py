"""``maple webhooks`` end to end: the emulator pushes signed batch events to the real server
process, and ``maple enrich`` with a poll interval of 600 s collects each batch as its event
comes; forged, stale and replayed deliveries change nothing and leave no secret in the log."""

import socket
import time
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.webhook_server import SECRET, delivery, webhooks_process

EVENTS = Path("_webhooks/openai/events")


def _job(tmp_path: Path, url: str, root: Path, *extra: str) -> tuple[int, float, str]:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(12)]}).write_csv(table)
    started = time.monotonic()
    done = maple(
        "enrich", str(table), "--prompt", "Name: {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(root), "--quiet",
        "--max-requests-per-batch", "4", "--output", str(tmp_path / "out.csv"), *extra,
        url=url, timeout=120,
    )  # fmt: skip
    return done.returncode, time.monotonic() - started, done.stderr


@pytest.mark.slow
def test_pushed_events_end_a_job_long_before_its_poll_interval(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with webhooks_process(root, tmp_path / "webhooks.log") as hook:
        config = EmulatorConfig(batch_seconds=3.0, webhook_url=hook, webhook_secret=SECRET)
        with EmulatorServer(config) as server:
            code, took, err = _job(tmp_path, server.url, root, "--poll-interval", "600")
            stats = server.stats()
    assert code == 0, err
    assert took < 30, f"took {took:.1f} s"
    assert stats["batches_created"] == 3 and stats["webhooks_sent"] == 3
    assert pl.read_csv(tmp_path / "out.csv")["llm_status"].to_list() == ["succeeded"] * 12
    assert not list((root / EVENTS).iterdir())  # each event consumed by the poll it caused
    print(f"3 batches of 3 s, --poll-interval 600, pushed events: {took:.1f} s")


@pytest.mark.slow
def test_without_webhooks_the_job_ends_by_polling(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=3.0)) as server:
        code, took, err = _job(tmp_path, server.url, tmp_path / "root", "--poll-interval", "2")
        stats = server.stats()
    assert code == 0, err
    assert stats["webhooks_sent"] == 0 and stats["batch_list_pages"] + stats["batch_retrievals"]
    # polled at the driver's --poll-interval, not at the sensor's default 30 s between events
    assert took < 25, f"took {took:.1f} s"
    print(f"3 batches of 3 s, --poll-interval 2, no webhooks: {took:.1f} s")


def test_forged_stale_and_replayed_deliveries_change_nothing(tmp_path: Path) -> None:
    root, log = tmp_path / "root", tmp_path / "webhooks.log"
    forged = delivery("batch_forged", "wh_forged", secret="whsec_" + "QUFBQUFBQUFBQUFBQUFBQQ==")
    stale = delivery("batch_stale", "wh_stale", sent=time.time() - 301)
    genuine = delivery("batch_one", "wh_one")
    with webhooks_process(root, log) as hook:
        answers = [
            httpx.post(hook, content=body, headers=headers).status_code
            for body, headers in (forged, stale, genuine)
        ]
        (root / EVENTS / "batch_one.json").unlink()  # consumed by the job that waited for it
        replayed = httpx.post(hook, content=genuine[0], headers=genuine[1]).status_code
        lines = log.read_text()
    assert answers == [400, 400, 200] and replayed == 200
    assert not list((root / EVENTS).iterdir())  # only the genuine one was kept, and consumed
    assert "no v1 signature matches" in lines and "stale" in lines and "replay" in lines
    for body, headers in (forged, stale, genuine):  # neither payloads nor signatures logged
        assert headers["webhook-signature"] not in lines and body.decode() not in lines


def test_a_bad_setup_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = maple("webhooks", "--port", "0", "--storage", str(tmp_path), clean=True)
    malformed = maple("webhooks", "--port", "0", "--storage", str(tmp_path),
                      OPENAI_WEBHOOK_SECRET="whsec_not base64!")  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = str(taken.getsockname()[1])
        busy = maple("webhooks", "--port", port, "--storage", str(tmp_path),
                     OPENAI_WEBHOOK_SECRET=SECRET)  # fmt: skip
    for done, says in ((missing, "OPENAI_WEBHOOK_SECRET"), (malformed, "not base64"),
                       (busy, "pick another --port")):  # fmt: skip
        assert done.returncode == 2 and says in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "not base64!" not in malformed.stderr  # the secret itself is never echoed
