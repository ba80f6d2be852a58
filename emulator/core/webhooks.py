"""OpenAI's batch webhooks as the emulator sends them: when a batch ends, one event POSTed to
``--webhook-url``, signed as Standard Webhooks signs (what OpenAI's dashboard webhooks do).

The event (https://platform.openai.com/docs/api-reference/webhook-events): ``{"id": "evt_...",
"object": "event", "created_at": <unix s>, "type": "batch.completed", "data": {"id": <batch
id>}}``; the type is ``batch.`` + how the batch ended (completed, failed, expired, cancelled).
Headers (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
``webhook-id`` (the same on every retry of one event), ``webhook-timestamp`` (unix seconds of
the attempt) and ``webhook-signature``: ``v1,`` + base64 HMAC-SHA256 of
``{id}.{timestamp}.{body}`` keyed by the base64-decoded part of the ``whsec_`` secret.

Deliveries run on one daemon thread, never on the thread that ended the batch; an attempt not
answered 2xx is retried after 0.5, 1, 2 and 4 s. Counters: ``webhooks_sent`` (events answered
2xx), ``webhooks_failed`` (events no attempt delivered).
"""

import base64
import hashlib
import hmac
import logging
import queue
import threading
import time
from collections.abc import Callable

import httpx
import orjson

from emulator.core.outcome import new_id

logger = logging.getLogger(__name__)

RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)
USER_AGENT = "OpenAI/1.0 (+https://platform.openai.com/docs/webhooks)"


def signing_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret (base64 after the prefix); another secret's bytes
    as they are, as OpenAI's SDK takes one."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"))
    return secret.encode()


def signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of one attempt."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class WebhookSender:
    """Posts batch events to one URL, in order, from its own thread."""

    def __init__(self, url: str, secret: str, count: Callable[[str], None]) -> None:
        self.url = url
        self.key = signing_key(secret)
        self.count = count  # adds one to a counter of ``/_emulator/stats``
        self._events: queue.Queue[bytes | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="emulator-webhooks", daemon=True)
        self._thread.start()

    def batch_ended(self, batch_id: str, status: str, at: float) -> None:
        """Queue the event of a batch that ended ``status`` at ``at``."""
        event = {
            "id": new_id("evt_"),
            "object": "event",
            "created_at": int(at),
            "type": f"batch.{status}",
            "data": {"id": batch_id},
        }
        self._events.put(orjson.dumps(event))

    def stop(self) -> None:
        self._events.put(None)
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        with httpx.Client(timeout=5.0) as client:
            while (body := self._events.get()) is not None:
                delivered = self._deliver(client, new_id("wh_"), body)
                self.count("webhooks_sent" if delivered else "webhooks_failed")

    def _deliver(self, client: httpx.Client, webhook_id: str, body: bytes) -> bool:
        for delay in (0.0, *RETRY_DELAYS_S):
            time.sleep(delay)
            stamp = int(time.time())
            headers = {
                "content-type": "application/json",
                "user-agent": USER_AGENT,
                "webhook-id": webhook_id,
                "webhook-timestamp": str(stamp),
                "webhook-signature": signature(self.key, webhook_id, stamp, body),
            }
            try:
                answer = client.post(self.url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                logger.warning("webhook %s to %s: %s", webhook_id, self.url, exc)
                continue
            if answer.is_success:
                return True
            logger.warning(
                "webhook %s to %s: answered %s", webhook_id, self.url, answer.status_code
            )
        return False
