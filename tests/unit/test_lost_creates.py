"""A create whose answer leaves open whether it was done (`request`'s ``made``): looked up before
it is sent again, and what the lookup finds is its answer. The server is a fake HTTP transport
that answers from a script and counts what it was sent."""

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from maple_engine.errors import ProviderError
from maple_engine.providers.http import make_client, request

BATCH = {"id": "batch_1", "status": "validating"}


class Server:
    """Answers the calls in turn from ``script`` (a response or an exception to raise)."""

    def __init__(self, *script: httpx.Response | Exception) -> None:
        self.script = list(script)
        self.sent = 0

    def __call__(self, sent: httpx.Request) -> httpx.Response:
        self.sent += 1
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


class Lookup:
    """A lookup that finds ``found`` from its ``after``-th call on, counting its calls."""

    def __init__(self, found: dict[str, Any] | None, after: int = 1) -> None:
        self.found, self.after, self.calls = found, after, 0

    def __call__(self) -> dict[str, Any] | None:
        self.calls += 1
        return self.found if self.calls >= self.after else None


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _: None)


def create(server: Server, made: Callable[[], dict[str, Any] | None]) -> httpx.Response:
    transport = httpx.MockTransport(server)
    with make_client("http://api/v1", {}, 5, transport=transport) as client:
        return request(client, "POST", "/batches", what="create batch", json={}, made=made)


def test_a_500_after_the_work_is_done_is_answered_by_what_the_lookup_finds() -> None:
    server, lookup = Server(httpx.Response(500, json={})), Lookup(BATCH)
    assert create(server, lookup).json() == BATCH
    assert (server.sent, lookup.calls) == (1, 1)


@pytest.mark.parametrize(
    "lost", [httpx.ReadTimeout("read"), httpx.RemoteProtocolError("gone"), httpx.ReadError("x")]
)
def test_a_connection_lost_once_the_request_left_is_looked_up(lost: Exception) -> None:
    server, lookup = Server(lost), Lookup(BATCH)
    assert create(server, lookup).json() == BATCH
    assert server.sent == 1


def test_when_nothing_was_made_the_create_is_sent_again() -> None:
    server = Server(httpx.Response(503, json={}), httpx.Response(200, json=BATCH))
    lookup = Lookup(None)
    assert create(server, lookup).json() == BATCH
    assert (server.sent, lookup.calls) == (2, 1)


def test_a_refusal_or_an_unsent_request_is_not_looked_up() -> None:
    refused = Server(httpx.Response(429, json={}), httpx.Response(200, json=BATCH))
    unsent = Server(httpx.ConnectError("refused"), httpx.Response(200, json=BATCH))
    for server in (refused, unsent):
        lookup = Lookup(BATCH)
        assert create(server, lookup).json() == BATCH
        assert (server.sent, lookup.calls) == (2, 0)


def test_a_create_never_answered_and_never_found_ends_in_its_error() -> None:
    server, lookup = Server(*[httpx.Response(500, json={})] * 6), Lookup(None)
    with pytest.raises(ProviderError, match="create batch: POST /batches answered 500"):
        create(server, lookup)
    assert server.sent == lookup.calls == 6
