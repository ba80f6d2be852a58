"""What the emulator bills: one charge per billed request, per organisation and API key.

Every successful request (a batch line or a real-time call) is recorded with the key that sent
it, its organisation, model, tokens and price, so the providers' admin reports
(``emulator.admin_routes``) can be served from the emulator's own records, including spend that
did not come through Maple (another key of the same organisation). Keys belong to the
organisation ``EmulatorConfig.organizations`` maps them to, else to ``DEFAULT_ORG``. Prices come
from genai-prices (batch requests at half the standard rate; a model genai-prices does not know
is priced as gpt-4o-mini, as Maple prices the emulator's models).
"""

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from genai_prices import Usage, calc_price

DEFAULT_ORG = "org-emulator"
FALLBACK_MODEL = "gpt-4o-mini"
BATCH_DISCOUNT = Decimal("0.5")
Family = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Charge:
    """One billed request."""

    family: Family
    org: str
    api_key: str
    model: str
    at: float  # unix seconds
    batch_id: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal


def price(
    family: Family, model: str, input_tokens: int, output_tokens: int, batch: bool
) -> Decimal:
    """USD for one request at ``family``'s published rates (half for a batch request)."""
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    try:
        total = calc_price(usage, model_ref=model, provider_id=family).total_price
    except LookupError:
        total = calc_price(usage, model_ref=FALLBACK_MODEL, provider_id="openai").total_price
    return total * BATCH_DISCOUNT if batch else total


class Billing:
    """Thread-safe list of charges."""

    def __init__(self, organizations: dict[str, str]) -> None:
        self._organizations = organizations
        self._lock = threading.Lock()
        self._charges: list[Charge] = []

    def org_of(self, api_key: str) -> str:
        """The organisation an API or admin key belongs to."""
        return self._organizations.get(api_key, DEFAULT_ORG)

    def charge(
        self,
        family: Family,
        api_key: str,
        model: str,
        tokens: tuple[int, int],
        *,
        at: float,
        batch_id: str | None = None,
    ) -> None:
        """Bill ``tokens`` (input, output) of one successful request."""
        cost = price(family, model, *tokens, batch=batch_id is not None)
        entry = Charge(family, self.org_of(api_key), api_key, model, at, batch_id, *tokens, cost)
        with self._lock:
            self._charges.append(entry)

    def charges(self, family: Family, org: str, start: float, end: float) -> Iterator[Charge]:
        """``family``'s charges to ``org`` in [start, end)."""
        with self._lock:
            found = list(self._charges)
        return (c for c in found if c.family == family and c.org == org and start <= c.at < end)
