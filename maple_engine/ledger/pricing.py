"""Model prices, token usage and cost arithmetic (pure: no Dagster, no I/O).

Where prices come from (genai-prices, a price file, the emulator's fallback) and their caveats:
``maple_engine.ledger.price_book``.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

DEFAULT_BATCH_DISCOUNT = 0.5
DEFAULT_PRIORITY_MULTIPLE = 2.0  # a priority tier's price (OpenAI's): twice the standard
DEFAULT_OUTPUT_ESTIMATE = 256
"""Output tokens assumed per request when the request sets no `max_output_tokens`."""


@dataclass(frozen=True)
class TokenUsage:
    """Tokens one request (or a sum of requests) was billed for.

    `input_tokens` is ALL input consumed: fresh input + cache reads + cache writes, so it is what
    the output table's `llm_input_tokens` shows whatever the provider.
    """

    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    def __post_init__(self) -> None:
        if min(self.cached_input_tokens, self.cache_write_tokens, self.output_tokens) < 0:
            raise ValueError(f"token counts must not be negative: {self}")
        if self.fresh_input_tokens < 0:
            raise ValueError(f"cached + cache-write tokens exceed input tokens: {self}")

    @property
    def fresh_input_tokens(self) -> int:
        """Input tokens billed at the full input price."""
        return self.input_tokens - self.cached_input_tokens - self.cache_write_tokens

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.output_tokens + other.output_tokens,
        )

    @classmethod
    def from_openai(cls, usage: Mapping[str, Any]) -> "TokenUsage":
        """From an OpenAI `usage` (chat completions or Responses API).

        `prompt_tokens` / `input_tokens` already INCLUDE `cached_tokens` (and `cache_write_tokens`).
        """
        prompt = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        output = usage.get("completion_tokens", usage.get("output_tokens")) or 0
        return cls(
            input_tokens=int(prompt),
            cached_input_tokens=int(details.get("cached_tokens") or 0),
            cache_write_tokens=int(details.get("cache_write_tokens") or 0),
            output_tokens=int(output),
        )

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, Any]) -> "TokenUsage":
        """From an Anthropic `usage`: `input_tokens` EXCLUDES cache reads and cache creation."""
        fresh = int(usage.get("input_tokens") or 0)
        read = int(usage.get("cache_read_input_tokens") or 0)
        write = int(usage.get("cache_creation_input_tokens") or 0)
        return cls(
            input_tokens=fresh + read + write,
            cached_input_tokens=read,
            cache_write_tokens=write,
            output_tokens=int(usage.get("output_tokens") or 0),
        )


@dataclass(frozen=True)
class Rates:
    """USD per million tokens, by kind."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float
    cache_write_per_mtok: float


@dataclass(frozen=True)
class ModelPrice:
    """A model's prices in USD per million tokens.

    Batch requests cost `batch_rates` when the price source publishes them, else the standard
    rates times `batch_discount`.
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float
    cache_write_per_mtok: float
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    source: str = "override"
    batch_rates: Rates | None = None
    cache_priced: bool = True  # the source prices cache reads (else they cost the input price)
    priority_multiple: float = DEFAULT_PRIORITY_MULTIPLE  # a priority tier's price / standard

    def at_priority(self) -> "ModelPrice":
        """The price on a priority tier: every standard rate times ``priority_multiple`` (a
        priority request is never batch-priced)."""
        m = self.priority_multiple
        return dataclasses.replace(
            self,
            input_per_mtok=self.input_per_mtok * m,
            output_per_mtok=self.output_per_mtok * m,
            cached_input_per_mtok=self.cached_input_per_mtok * m,
            cache_write_per_mtok=self.cache_write_per_mtok * m,
            batch_rates=None,
            batch_discount=1.0,
            source=f"{self.source}; priority tier = {m:g}x standard",
        )

    def rates(self, batch: bool) -> tuple[Rates, float]:
        """The per-MTok rates and the multiplier applied to their sum."""
        if batch and self.batch_rates is not None:
            return self.batch_rates, 1.0
        standard = Rates(
            self.input_per_mtok,
            self.output_per_mtok,
            self.cached_input_per_mtok,
            self.cache_write_per_mtok,
        )
        return standard, (self.batch_discount if batch else 1.0)


def cost_usd(price: ModelPrice, usage: TokenUsage, batch: bool) -> float:
    """What `usage` costs in USD: each token kind at its own price, batch-discounted if `batch`."""
    r, multiplier = price.rates(batch)
    total = (
        usage.fresh_input_tokens * r.input_per_mtok
        + usage.cached_input_tokens * r.cached_input_per_mtok
        + usage.cache_write_tokens * r.cache_write_per_mtok
        + usage.output_tokens * r.output_per_mtok
    )
    return total * _scale(multiplier)


def _scale(multiplier: float) -> float:
    """Per-MTok to USD, with the batch multiplier folded in. `cost_usd` and `cost_expr` both
    multiply by this one constant: polars turns a column division into a multiplication by the
    reciprocal, so dividing by 1e6 would differ from Python in the last bit."""
    return multiplier / 1e6


def uncached_cost_usd(price: ModelPrice, usage: TokenUsage, batch: bool) -> float:
    """What `usage` would cost with no prompt cache: every input token at the input price."""
    return cost_usd(price, TokenUsage(usage.input_tokens, output_tokens=usage.output_tokens), batch)


#: the tier a provider names when it served a request at the standard price (Gemini's
#: ``x-gemini-service-tier: standard``: a priority request over its limit)
STANDARD_TIER = "standard"


def served_standard() -> pl.Expr:
    """The rows a provider says it served at the standard tier (their ``served_tier``)."""
    return pl.col("served_tier").fill_null("") == STANDARD_TIER


def cost_expr(price: ModelPrice, batch: bool, *, cached: bool = True) -> pl.Expr:
    """`cost_usd` as a polars expression over the `input_tokens`, `cached_input_tokens`,
    `cache_write_tokens` and `output_tokens` columns; bit-identical to `cost_usd` per row.
    ``cached=False``: `uncached_cost_usd` (cache reads and writes as fresh input)."""
    r, multiplier = price.rates(batch)
    if cached:
        cached_in, write = pl.col("cached_input_tokens"), pl.col("cache_write_tokens")
    else:
        cached_in = write = pl.lit(0, pl.Int64)
    return _cost(r, multiplier, cached_in, write)


def _cost(r: Rates, multiplier: float, cached: pl.Expr, write: pl.Expr) -> pl.Expr:
    fresh = pl.col("input_tokens") - cached - write
    total = (
        fresh.cast(pl.Float64) * r.input_per_mtok
        + cached.cast(pl.Float64) * r.cached_input_per_mtok
        + write.cast(pl.Float64) * r.cache_write_per_mtok
        + pl.col("output_tokens").cast(pl.Float64) * r.output_per_mtok
    )
    return (total * _scale(multiplier)).alias("cost_usd")


def estimate_tokens(text: str) -> int:
    """Offline token estimate: one token per 4 characters, rounded up, at least 1.

    Exactly the emulator's count and close to OpenAI's published "~4 characters per token" rule
    for English; real tokenizers differ by a few percent either way.
    """
    return max(1, (len(text) + 3) // 4)


def estimate_request_tokens(
    system: str | None, user: str, max_output_tokens: int | None
) -> tuple[int, int]:
    """(prompt, output) token estimates for one chat request, using the emulator's formula:
    3 tokens of framing per message plus its content, plus 3 for the reply primer. Output is
    `max_output_tokens` when set (the worst case), else `DEFAULT_OUTPUT_ESTIMATE`."""
    messages = [system, user] if system else [user]  # the emulator skips an empty system
    prompt = sum(estimate_tokens(m) + 3 for m in messages) + 3
    output = max_output_tokens if max_output_tokens is not None else DEFAULT_OUTPUT_ESTIMATE
    return prompt, max(0, output)
