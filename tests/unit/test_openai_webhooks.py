"""OpenAI's webhook deliveries verified as Standard Webhooks says, and as OpenAI's own SDK
verifies them: what one accepts, the other does."""

import base64
import time

import openai
import orjson
import pytest

from emulator.core.webhooks import signature
from maple_engine.errors import ConfigError
from maple_engine.providers.openai.webhooks import batch_event, signing_key, verify
from maple_engine.providers.pushed import RefusedEvent

SECRET = "whsec_" + base64.b64encode(b"unit-test-webhook-signing-key-32").decode()
KEY = signing_key(SECRET)
BODY = orjson.dumps({"id": "evt_1", "object": "event", "created_at": 1, "type": "batch.expired",
                     "data": {"id": "batch_abc"}})  # fmt: skip


def _headers(body: bytes = BODY, age: float = 0.0, key: bytes = KEY) -> dict[str, str]:
    """Headers signed now (the SDK checks against the clock), or ``age`` seconds ago."""
    stamp = int(time.time() - age)
    return {
        "webhook-id": "wh_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature(key, "wh_1", stamp, body),
    }


def _sdk_accepts(headers: dict[str, str], body: bytes) -> bool:
    try:
        openai.OpenAI(api_key="unused", webhook_secret=SECRET).webhooks.verify_signature(
            body, headers
        )
    except openai.InvalidWebhookSignatureError:
        return False
    return True


def test_a_genuine_delivery_names_its_batch() -> None:
    headers = _headers()
    assert verify(KEY, headers, BODY, time.time()) == "wh_1" and _sdk_accepts(headers, BODY)
    event = batch_event("wh_1", BODY)
    assert event is not None and (event.type, event.batch_id) == ("batch.expired", "batch_abc")


def test_one_matching_signature_among_several_is_enough() -> None:
    headers = _headers()
    headers["webhook-signature"] = "v1,bm90IGl0 " + headers["webhook-signature"]  # rotation
    assert verify(KEY, headers, BODY, time.time()) == "wh_1" and _sdk_accepts(headers, BODY)


@pytest.mark.parametrize(
    ("age", "key", "tampered", "drop", "why"),
    [
        (0, b"another key", False, None, "no v1 signature matches"),
        (0, KEY, True, None, "no v1 signature matches"),
        (400, KEY, False, None, "stale"),
        (-400, KEY, False, None, "stale"),
        (0, KEY, False, "webhook-id", "missing"),
    ],
    ids=["wrong-secret", "tampered-body", "too-old", "too-new", "no-id"],
)
def test_forged_or_stale_deliveries_are_refused(
    age: float, key: bytes, tampered: bool, drop: str | None, why: str
) -> None:
    headers = {k: v for k, v in _headers(age=age, key=key).items() if k != drop}
    body = BODY.replace(b"batch_abc", b"batch_xyz") if tampered else BODY
    with pytest.raises(RefusedEvent, match=why):
        verify(KEY, headers, body, time.time())
    if "webhook-id" in headers:
        assert not _sdk_accepts(headers, body)


def test_the_tolerance_is_300_seconds_either_way() -> None:
    headers = _headers()
    sent = int(headers["webhook-timestamp"])
    for now in (sent - 300, sent + 300):
        assert verify(KEY, headers, BODY, now) == "wh_1"
    for now in (sent - 301, sent + 301):
        with pytest.raises(RefusedEvent, match="stale"):
            verify(KEY, headers, BODY, now)


def test_other_event_types_are_not_batch_events() -> None:
    body = BODY.replace(b"batch.expired", b"response.completed")
    assert batch_event("wh_1", body) is None


def test_a_malformed_secret_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"OPENAI_WEBHOOK_SECRET .* not base64"):
        signing_key("whsec_not base64!")
