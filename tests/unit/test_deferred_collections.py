"""The CLI's runner collects ended batches together while shards are still being admitted one
tick at a time, instead of one Dagster run per ended batch."""

import pytest

from maple_assets.api import runner
from maple_assets.api.runner import _Deferred


def test_collections_wait_while_shards_are_submitted_then_go_together() -> None:
    deferred = _Deferred()
    deferred.add(["s0"])
    assert not deferred.due(submitting=True)
    deferred.add(["s1"])
    assert not deferred.due(submitting=True)
    assert deferred.due(submitting=False)  # a tick that submits nothing collects them all
    assert deferred.take() == ["s0", "s1"]
    assert not deferred.due(submitting=False)  # nothing left


def test_collections_wait_at_most_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    deferred = _Deferred()
    deferred.add([f"s{i}" for i in range(_Deferred.MAX_SHARDS)])
    assert deferred.due(submitting=True)  # enough of them
    deferred.take()
    now = [1000.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    deferred.add(["late"])
    assert not deferred.due(submitting=True)
    now[0] += _Deferred.MAX_WAIT_S + 1
    assert deferred.due(submitting=True)  # waited long enough: progress stays live
