"""Pushed batch events under a local storage root: recorded once per delivery id, listed,
consumed, and pruned when old."""

import os
import time
from pathlib import Path

from maple_engine.storage.batch_events import BatchEvents
from maple_engine.storage.storage import Storage


def test_a_delivery_id_is_recorded_once(tmp_path: Path) -> None:
    events = BatchEvents(Storage(str(tmp_path)), "openai")
    assert events.record("wh_1", "batch_a", "batch.completed")
    events.consume({"batch_a"})
    assert not events.record("wh_1", "batch_a", "batch.completed")  # replayed: nothing kept
    assert events.record("wh_2", "batch_b", "batch.failed")
    assert events.waiting() == {"batch_b"} and events.among({"batch_a", "batch_b"}) == {"batch_b"}


def test_old_events_and_ids_are_pruned(tmp_path: Path) -> None:
    events = BatchEvents(Storage(str(tmp_path)), "openai")
    events.record("wh_old", "batch_old", "batch.expired")
    events.record("wh_new", "batch_new", "batch.completed")
    old = time.time() - 4 * 24 * 3600
    for path in (tmp_path / "_webhooks/openai").rglob("*"):
        if path.is_file() and ("batch_old" in path.name or path.parent.name == "ids"):
            os.utime(path, (old, old))
    assert events.prune() == 3  # batch_old's event and both ids
    assert events.waiting() == {"batch_new"}
    assert events.record("wh_old", "batch_old", "batch.expired")  # its id forgotten with it
