"""What the emulator bills: one charge per billed request, per organisation and API key.

Every successful request (a batch line or a real-time call) is recorded with the key that sent
it, its organisation, model, tokens and price, its OpenAI project (the ``OpenAI-Project`` header
of the call, or of the batch's create) or Anthropic workspace (its key's, ``--workspace``), so
the providers' admin reports (``emulator.core.admin_routes``) can be served from the emulator's own
records, including spend that did not come through Maple (another key of the same
organisation). Keys belong to the organisation ``EmulatorConfig.organizations`` maps them to,
else to ``DEFAULT_ORG``. Prices come from genai-prices (a model genai-prices does not know is
priced as gpt-4o-mini, as Maple prices the emulator's models): batch requests at the model's
published batch rates, else half the standard rate; prompt-cache reads at the cache-read rate
(a batch's own, where published); cache writes at the cache-write rate, and 1-hour writes
(Anthropic) at twice the input rate.
OpenAI's priority tier (``service_tier: "priority"``) is billed at `PRIORITY_MULTIPLE` times the
standard price.
"""

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from genai_prices import Usage, calc_price

from emulator.core.prompt_cache import ONE_HOUR, CacheUse

DEFAULT_ORG = "org-emulator"
FALLBACK_MODEL = "gpt-4o-mini"
BATCH_DISCOUNT = Decimal("0.5")
PRIORITY_MULTIPLE = Decimal(2)  # OpenAI's priority tier: twice the standard price
BATCH = {"processing": "batch"}  # genai-prices' batch price variant
NO_CACHE = CacheUse()
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
    input_tokens: int  # every input token, cache reads and writes included
    output_tokens: int
    cost_usd: Decimal
    cache: CacheUse = NO_CACHE  # of input_tokens: read from / written to the prompt cache
    project: str | None = None  # OpenAI: the ``OpenAI-Project`` it was sent with (None: default)
    workspace: str | None = None  # Anthropic: its key's workspace (None: the default one)
    service_tier: str | None = None  # "priority" for OpenAI's priority tier, else by batch_id

    @property
    def uncached_input_tokens(self) -> int:
        return self.input_tokens - self.cache.read - self.cache.write

    @property
    def cache_write_1h_tokens(self) -> int:
        return self.cache.write if self.cache.ttl == ONE_HOUR else 0


def price(
    family: Family, model: str, tokens: tuple[int, int], batch: bool, cache: CacheUse = NO_CACHE
) -> Decimal:
    """USD for one request's (input, output) tokens at ``family``'s published rates, ``cache``
    of the input read from or written to the prompt cache."""
    long_writes = cache.write if cache.ttl == ONE_HOUR else 0
    usage = Usage(
        input_tokens=tokens[0] - long_writes,
        cache_read_tokens=cache.read,
        cache_write_tokens=cache.write - long_writes,
        output_tokens=tokens[1],
    )
    total = _published(family, model, usage, batch)
    if long_writes:  # Anthropic's 1-hour writes: twice the input rate
        total += 2 * _published(family, model, Usage(input_tokens=long_writes), batch)
    return total


def _published(family: Family, model: str, usage: Usage, batch: bool) -> Decimal:
    """``usage`` at the model's rates: its batch rates if published, else half the standard."""
    try:
        standard = calc_price(usage, model_ref=model, provider_id=family)
    except LookupError:
        model, family = FALLBACK_MODEL, "openai"
        standard = calc_price(usage, model_ref=model, provider_id=family)
    if not batch:
        return standard.total_price
    batched = calc_price(usage, model_ref=model, provider_id=family, price_context=BATCH)
    if batched.model_price != standard.model_price:  # the published batch variant
        return batched.total_price
    return standard.total_price * BATCH_DISCOUNT


class Billing:
    """Thread-safe list of charges."""

    def __init__(self, organizations: dict[str, str], workspaces: dict[str, str]) -> None:
        self._organizations = organizations
        self._workspaces = workspaces
        self._lock = threading.Lock()
        self._charges: list[Charge] = []

    def org_of(self, api_key: str) -> str:
        """The organisation an API or admin key belongs to."""
        return self._organizations.get(api_key, DEFAULT_ORG)

    def workspace_of(self, api_key: str) -> str | None:
        """The Anthropic workspace an API key belongs to (None: the default one)."""
        return self._workspaces.get(api_key)

    def charge(
        self,
        family: Family,
        api_key: str,
        model: str,
        tokens: tuple[int, int],
        *,
        at: float,
        batch_id: str | None = None,
        cache: CacheUse = NO_CACHE,
        project: str | None = None,
        priority: bool = False,
    ) -> None:
        """Bill ``tokens`` (input, output) of one successful request (or of a batch's
        requests), ``cache`` of the input read from or written to the prompt cache, to
        ``project`` (OpenAI's header) and the key's workspace (Anthropic's); ``priority``: on
        the priority tier."""
        cost = price(family, model, tokens, batch_id is not None, cache)
        if priority:
            cost *= PRIORITY_MULTIPLE
        org = self.org_of(api_key)
        workspace = self.workspace_of(api_key) if family == "anthropic" else None
        tier = "priority" if priority else None
        entry = Charge(
            family,
            org,
            api_key,
            model,
            at,
            batch_id,
            *tokens,
            cost,
            cache,
            project,
            workspace,
            tier,
        )
        with self._lock:
            self._charges.append(entry)

    def charges(self, family: Family, org: str, start: float, end: float) -> Iterator[Charge]:
        """``family``'s charges to ``org`` in [start, end)."""
        with self._lock:
            found = list(self._charges)
        return (c for c in found if c.family == family and c.org == org and start <= c.at < end)
