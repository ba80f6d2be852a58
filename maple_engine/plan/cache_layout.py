"""The prompt-cache layout of a job: how much of each request is a shared prefix, whether that
reaches the model's minimum cacheable length, and what the cache is expected to read.

Every request is laid out static part first: the system prompt (rules, schema, examples), then
the row's rendered template. The system prompt is the shared prefix; its tokens are estimated
as the emulator counts them (`maple_engine.ledger.pricing.estimate_request_tokens`: the text's
tokens plus 3 of message framing). The minimum per provider and model is the provider's
`PromptCaching` record (docs/caching.md has the table).

With ``--cache auto``, hints go out when the estimated prefix is at least ``HINT_SHARE`` of the
minimum: estimates run a little under real tokenizers, and a hint on a shorter prefix is
ignored by the provider at no cost. Below that, and with ``--cache off``, requests carry no hint.
"""

import dataclasses

from maple_engine.inputs.templates import parse_template
from maple_engine.ledger.price_book import UnknownModelPriceError
from maple_engine.ledger.pricing import ModelPrice, TokenUsage, estimate_tokens
from maple_engine.providers.base import PromptCaching
from maple_engine.providers.registry import capabilities
from maple_engine.spec import JobSpec

MESSAGE_FRAMING = 3  # tokens around one message, as `estimate_request_tokens` counts them
HINT_SHARE = 0.75


@dataclasses.dataclass(frozen=True)
class CacheLayout:
    """The shared prefix of a job's requests against its model's cache."""

    caching: PromptCaching | None
    model: str
    enabled: bool  # --cache auto
    prefix_tokens: int  # shared by every request (the system prompt)
    template_head_tokens: int  # static template text before its first placeholder
    minimum: int  # the model's shortest cacheable prefix (0: the provider does not cache)

    @property
    def cacheable_tokens(self) -> int:
        """Tokens of each request the provider can read from cache once it is written."""
        if self.caching is None or not self.enabled:
            return 0
        return self.caching.cacheable(self.model, self.prefix_tokens) if self.reaches else 0

    @property
    def reaches(self) -> bool:
        return self.caching is not None and self.prefix_tokens >= self.minimum

    @property
    def sends_hints(self) -> bool:
        """Whether requests carry the provider's cache hint (``cache_control``, a cache key)."""
        explicit = self.caching is not None and self.caching.hint != "implicit"
        return self.enabled and explicit and self.prefix_tokens >= HINT_SHARE * self.minimum

    def expected_usage(self, requests: int, shards: int) -> TokenUsage:
        """Cache reads and writes over ``requests`` in ``shards``: each shard's first request
        writes the prefix (billed only where the provider bills writes), the rest read it."""
        per = self.cacheable_tokens
        if per == 0 or requests == 0:
            return TokenUsage()
        writes = min(shards, requests)
        billed_writes = writes if self.caching and self.caching.hint == "cache-control" else 0
        return TokenUsage(
            input_tokens=requests * per,
            cached_input_tokens=(requests - writes) * per,
            cache_write_tokens=billed_writes * per,
        )

    def describe(self) -> str:
        """One line for the dry run and the summary."""
        if self.caching is None:
            return "not used: this provider has no prompt cache"
        if not self.enabled:
            return f"off (--cache off); shared prefix ~{self.prefix_tokens:,} tokens"
        head = ""
        if self.template_head_tokens >= 64:
            head = (
                f"; the template starts with ~{self.template_head_tokens:,} tokens of fixed "
                "text: move it into --system so it is cached"
            )
        if self.prefix_tokens == 0 and not head:
            return "nothing to cache: no --system prompt shared by every row"
        if not self.reaches:
            return (
                f"shared prefix ~{self.prefix_tokens:,} tokens per request, under the model's "
                f"minimum of {self.minimum:,}: not cached{head}"
            )
        return (
            f"shared prefix ~{self.prefix_tokens:,} tokens per request (minimum "
            f"{self.minimum:,}): ~{self.cacheable_tokens:,} read from cache after each shard's "
            f"first request{head}"
        )


def cache_layout(spec: JobSpec) -> CacheLayout:
    """The layout of ``spec``'s requests on its provider and model."""
    caching = capabilities(spec.provider).caching
    system = spec.system or ""
    prefix = estimate_tokens(system) + MESSAGE_FRAMING if system.strip() else 0
    parts = parse_template(spec.template)
    head = parts[0] if parts and isinstance(parts[0], str) else ""
    return CacheLayout(
        caching=caching,
        model=spec.model,
        enabled=spec.cache == "auto",
        prefix_tokens=prefix,
        template_head_tokens=estimate_tokens(head) if head else 0,
        minimum=caching.minimum(spec.model) if caching is not None else 0,
    )


def check_cache_price(spec: JobSpec, price: ModelPrice) -> None:
    """Refuse, before anything is sent, a job whose requests will be read from the prompt cache
    when nothing prices cache reads for its model (as a model with no price is refused)."""
    layout = cache_layout(spec)
    if price.cache_priced or spec.allow_untracked_cost or not layout.cacheable_tokens:
        return
    raise UnknownModelPriceError(
        f"No cache-read price known for model {spec.model!r} on provider {spec.provider!r}, "
        f"and its requests share a ~{layout.prefix_tokens:,}-token prefix the provider caches. "
        'Add "cached_input_per_mtok" for it to a price file ($MAPLE_PRICES), run with --cache '
        "off, or with --allow-untracked-cost to price cached tokens at the input price."
    )
