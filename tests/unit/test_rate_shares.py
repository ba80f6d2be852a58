"""Senders sharing one limit count each other by heartbeats whose age is read on the storage's
clock: a sender on a host whose clock is far off neither lingers in the count nor drops out."""

import os
import time
from pathlib import Path

import pytest

from maple_engine.send.rate_shares import TTL_S, RateShare
from maple_engine.storage.clock import OFFSET_ENV
from maple_engine.storage.storage import Storage


def share(root: Path) -> RateShare:
    return RateShare(Storage(str(root)), "openai-realtime", "acct", "gpt-4o-mini")


def test_live_senders_count_each_other_and_one_that_leaves_drops_out(tmp_path: Path) -> None:
    first, second = share(tmp_path), share(tmp_path)
    assert first.beat() == (1, 0)
    two, rank = second.beat()
    assert two == 2 and first.beat() == (2, 1 - rank)  # ranked by name: one each
    second.leave()
    assert first.beat() == (1, 0)


def test_a_heartbeat_is_judged_by_when_the_storage_saw_it_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / share(tmp_path).folder
    folder.mkdir(parents=True)
    far_future = time.time() + 3600  # written by a host whose clock runs an hour ahead
    silent = folder / f"host-a-1-deadbeef~{far_future:.3f}.json"
    silent.write_bytes(b"{}")
    old = time.time() - TTL_S - 1
    os.utime(silent, (old, old))
    monkeypatch.setenv(OFFSET_ENV, "-3600")  # and this host's clock an hour behind
    assert share(tmp_path).beat()[0] == 1  # silent for a TTL: gone, whatever the clocks say
    os.utime(silent, None)  # written just now
    assert share(tmp_path).beat()[0] == 3  # it, the previous sender, this one
    gone = time.time() - 7 * TTL_S
    os.utime(silent, (gone, gone))
    share(tmp_path).beat()
    assert not silent.exists()  # long dead: tidied away


def test_a_new_sender_is_counted_once_every_live_one_has_written_since_it_came(
    tmp_path: Path,
) -> None:
    first, second = share(tmp_path), share(tmp_path)
    first.beat()
    assert first.counted()  # alone: nobody to wait for
    time.sleep(0.02)  # a later modification time
    second.beat()
    assert not second.counted()  # the first has not listed it yet
    time.sleep(0.02)
    first.beat()
    assert second.counted()
