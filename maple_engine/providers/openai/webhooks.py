"""OpenAI's batch webhooks on the wire: how a pushed event is verified and what it says.

OpenAI signs its webhooks as Standard Webhooks do
(https://platform.openai.com/docs/guides/webhooks,
https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
headers ``webhook-id`` (the same on every retry of one event), ``webhook-timestamp`` (unix
seconds of the attempt) and ``webhook-signature``, a space-separated list of ``v1,<base64>``
entries, each an HMAC-SHA256 of ``{webhook-id}.{webhook-timestamp}.{raw body}`` keyed by the
base64-decoded part of the ``whsec_`` secret after the prefix (a secret without it: its bytes,
as OpenAI's SDK takes one). A timestamp more than 300 s from now either way is refused.

The batch events (https://platform.openai.com/docs/api-reference/webhook-events):
``{"id": "evt_...", "object": "event", "created_at": ..., "type": "batch.completed", "data":
{"id": "batch_..."}}`` with ``type`` one of ``batch.completed``, ``batch.failed``,
``batch.expired``, ``batch.cancelled``. Other event types are verified and ignored.
"""

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

import orjson

from maple_engine.errors import ConfigError
from maple_engine.providers.pushed import BatchEvent, EventWire, RefusedEvent

TOLERANCE_S = 300
SECRET_PREFIX = "whsec_"
BATCH_EVENTS = frozenset({"batch.completed", "batch.failed", "batch.expired", "batch.cancelled"})


def signing_key(secret: str) -> bytes:
    """The HMAC key of ``secret``; a ``whsec_`` secret whose rest is not base64 is refused."""
    if not secret.startswith(SECRET_PREFIX):
        return secret.encode()
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ConfigError(
            "OPENAI_WEBHOOK_SECRET starts with whsec_ but the rest is not base64: copy the "
            "signing secret again from the webhook's page of the OpenAI dashboard"
        ) from None


def verify(key: bytes, headers: Mapping[str, str], body: bytes, now: float) -> str:
    """The ``webhook-id`` of a delivery signed with ``key`` within the tolerance of ``now``;
    `RefusedEvent` otherwise."""
    webhook_id, stamp, signatures = (
        headers.get(name, "") for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
    )
    if not (webhook_id and stamp and signatures):
        raise RefusedEvent("missing webhook-id, webhook-timestamp or webhook-signature")
    if "." in webhook_id:
        raise RefusedEvent("a webhook-id holds no '.'")
    try:
        sent = int(stamp)
    except ValueError:
        raise RefusedEvent("webhook-timestamp is not unix seconds") from None
    if abs(now - sent) > TOLERANCE_S:
        raise RefusedEvent(f"stale: sent {int(now - sent)} s from now (tolerance {TOLERANCE_S} s)")
    signed = f"{webhook_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    given = [s.removeprefix("v1,").encode() for s in signatures.split() if s.startswith("v1,")]
    if not any(hmac.compare_digest(expected, candidate) for candidate in given):
        raise RefusedEvent("no v1 signature matches the secret")
    return webhook_id


def batch_event(webhook_id: str, body: bytes) -> BatchEvent | None:
    """The batch event a verified ``body`` holds; None for another event type."""
    try:
        event = orjson.loads(body)
        kind, batch_id = event["type"], event["data"]["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise RefusedEvent("the body is not an event with a type and data.id") from None
    if kind not in BATCH_EVENTS:
        return None
    if not isinstance(batch_id, str) or not batch_id or "/" in batch_id or "." in batch_id:
        raise RefusedEvent("data.id is not a batch id")
    return BatchEvent(webhook_id, kind, batch_id)


WIRE = EventWire(
    secret_help="the signing secret OpenAI's dashboard showed when the endpoint was created "
    "(Settings > Project > Webhooks)",
    signing_key=signing_key,
    verify=verify,
    batch_event=batch_event,
)
