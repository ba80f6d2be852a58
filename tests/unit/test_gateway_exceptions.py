"""A 5xx that a gateway marks as its own exception (`maple_engine.providers.gateways`): never
repeated when it may have done the work upstream (a create), retried when it is a free read.
The server is a fake HTTP transport that counts what it was sent."""

import httpx
import pytest

from maple_engine.errors import ProviderError
from maple_engine.providers.gateways import gateway_exception
from maple_engine.providers.http import make_client, request

MARK = {"x-portkey-gateway-exception": "true"}
BODY = b'{"status":"failure","message":"Something went wrong"}'


def answer(status: int, headers: dict[str, str]) -> httpx.Response:
    return httpx.Response(status, headers=headers, content=BODY)


def test_only_a_marked_5xx_is_a_gateway_exception_named_with_its_mark_and_fix() -> None:
    said = gateway_exception(answer(500, MARK))
    assert said is not None and said.startswith("Portkey's gateway marked this 500")
    assert "(x-portkey-gateway-exception: true)" in said and "call the provider directly" in said
    assert gateway_exception(answer(500, {})) is None  # the provider's own 500
    assert gateway_exception(answer(400, MARK)) is None
    assert gateway_exception(answer(502, {"x-portkey-gateway-exception": "false"})) is None


class Server:
    """Answers every call with the gateway's marked 500, counting the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, sent: httpx.Request) -> httpx.Response:
        self.calls.append(sent.method)
        return answer(500, MARK)


def gateway(server: Server) -> httpx.Client:
    return make_client("http://gateway/v1", {}, 5, transport=httpx.MockTransport(server))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.setenv("MAPLE_OUTAGE_WINDOW_S", "0")
    monkeypatch.setattr("time.sleep", lambda _: None)  # the backoff between tries
    return Server()


def test_a_create_the_gateway_marks_is_sent_once_and_its_error_names_the_gateway(
    server: Server,
) -> None:
    with gateway(server) as client, pytest.raises(ProviderError) as raised:
        request(client, "POST", "/batches", what="create batch", json={})
    assert server.calls == ["POST"]
    message = str(raised.value)
    assert message.startswith("create batch: POST /batches answered 500: Something went wrong.")
    assert "Portkey's gateway marked this 500 as its own exception" in message


def test_a_read_the_gateway_marks_is_retried_as_any_5xx(server: Server) -> None:
    with gateway(server) as client, pytest.raises(ProviderError, match="Portkey's gateway marked"):
        request(client, "GET", "/batches/b1", what="poll batch b1", max_retries=2)
    assert server.calls == ["GET"] * 3
