"""AI gateways' marks on an error answer that is the gateway's own failure, not the provider's.

A gateway that throws while it handles the provider's answer (Portkey's gateway 1.15.2 on
Node 20 appends a header to the upstream's immutable answer on ``POST /v1/embeddings`` and on
file downloads) answers 5xx AFTER the provider answered and billed. Sending such a request
again pays for it again, so the real-time engine fails its rows at once, not resendable, and a
control call that creates something (an upload, a batch) is not repeated; a read (``GET``,
free) is retried as usual and its last error names the gateway. Each gateway is a row of data
below: the header that marks its exception and the value it carries.
"""

import dataclasses

import httpx


@dataclasses.dataclass(frozen=True)
class GatewayException:
    """How one gateway marks a 5xx as its own exception: ``header`` with ``value``."""

    gateway: str  # as a user knows it, e.g. "Portkey's gateway"
    header: str
    value: str


GATEWAY_EXCEPTIONS: tuple[GatewayException, ...] = (
    GatewayException("Portkey's gateway", "x-portkey-gateway-exception", "true"),
)


def gateway_exception(response: httpx.Response) -> str | None:
    """The sentence naming the gateway, its mark and the fix when ``response`` is a 5xx that a
    gateway marks as its own exception; None otherwise."""
    if response.status_code < 500:
        return None
    for mark in GATEWAY_EXCEPTIONS:
        if response.headers.get(mark.header, "").strip().lower() == mark.value:
            return (
                f"{mark.gateway} marked this {response.status_code} as its own exception "
                f"({mark.header}: {mark.value}), which it may raise after the provider answered "
                f"and billed: use a {mark.gateway} version that serves this route, or call the "
                "provider directly (its own base URL)"
            )
    return None
