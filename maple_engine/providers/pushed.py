"""What a provider that pushes batch events (webhooks) gives `maple webhooks`: how a delivery
is verified and which batch it says ended. One `EventWire` per such provider, in the registry's
``PUSHED_EVENTS`` under its capabilities' ``webhooks`` name."""

import dataclasses
from collections.abc import Callable, Mapping


class RefusedEvent(Exception):
    """A delivery that is not a genuine, fresh event: why, never its body or signature."""


@dataclasses.dataclass(frozen=True)
class BatchEvent:
    """A verified event: which batch ended, and how (the provider's event type)."""

    webhook_id: str
    type: str
    batch_id: str


@dataclasses.dataclass(frozen=True)
class EventWire:
    """One provider's pushed events on the wire."""

    #: where the provider shows the signing secret (``<NAME>_WEBHOOK_SECRET`` holds it)
    secret_help: str
    #: the secret's HMAC key (ConfigError if it is malformed)
    signing_key: Callable[[str], bytes]
    #: (key, headers, raw body, now) -> the delivery's id; RefusedEvent if forged or stale
    verify: Callable[[bytes, Mapping[str, str], bytes, float], str]
    #: (delivery id, raw body) -> the batch event, or None for an event of another kind
    batch_event: Callable[[str, bytes], BatchEvent | None]
