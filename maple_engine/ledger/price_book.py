"""Model prices by (model, provider): a price file's overrides first, then genai-prices.

Prices come from the `genai-prices` package (Pydantic's maintained price database, bundled with
the wheel so it works offline), overridable by a small JSON price file:

    {"models": {"my-model": {"provider": "openai", "input_per_mtok": 0.2, "output_per_mtok": 0.8,
                             "cached_input_per_mtok": 0.1, "cache_write_per_mtok": 0.25,
                             "batch_discount": 0.5}}}

given by path (the entry points pass `MAPLE_PRICES`; a run prices with its cost ledger's file).
Only the two `*_per_mtok` input and output prices are required; cached reads and cache writes
default to the input price (no discount assumed), `batch_discount` (the batch price as a share
of the real-time one: 0.8 is 20% off, the complement of `maple providers`' fraction taken off)
to the provider's published share (DeepInfra's 0.8, Groq's 0.75), else 0.5, and
`priority_multiple` (a priority tier's price over the standard one) to 2. An entry without
`provider` applies to every provider.

Batch prices: genai-prices publishes batch rates for many OpenAI and Anthropic models as a
`{"processing": "batch"}` price variant. When the variant is active for a model, its rates are
used as they are (e.g. OpenAI's Batch table has no cached-input rate for gpt-4o-mini, so cached
input keeps its standard rate there); otherwise the providers' published batch discount (50% for
OpenAI and Anthropic) is applied to the standard rates.

Providers: each provider's capabilities name the genai-prices providers (families) that price
its models, tried in order, and maybe a model that prices what none of them knows. So
`openai-realtime` is priced as `openai` and `anthropic-realtime` as `anthropic`; `gemini` and
`gemini-realtime` use genai-prices' `google` provider (Gemini's batch rates are published there),
`bedrock` its `aws` provider (Bedrock model ids; batch = 50% of on-demand). The local `emulator`
serves any model name: it is priced as OpenAI, then Anthropic, and a model neither knows is priced
as gpt-4o-mini (the `source` says so), so emulator runs show realistic costs. A name no provider
is registered under is taken as a genai-prices provider id.

Priority tier (OpenAI's ``service_tier: "priority"``, a deadline's last lane): every standard
rate times ``priority_multiple``, 2 by default as OpenAI's priority processing is priced; the
emulator bills it so. genai-prices' own ``service_tier: priority`` variant (e.g. gpt-4o-mini at
$0.25 / $1.00 per MTok) is not read: set ``priority_multiple`` in the price file to match it.

Cache prices: reads and writes at genai-prices' ``cache_read_mtok`` / ``cache_write_mtok`` (the
batch variant's in batches). A provider whose caching writes with a longer TTL states the write
price as a multiple of the input price (`PromptCaching.write_multiple`: Anthropic's 1-hour
writes, 2x input, batch-discounted in batches as Anthropic documents).

Caveats: tiered (long-context) prices use the base tier, so a single request above the tier
threshold (200k input tokens for Claude Sonnet 4.x, 272k for gpt-5.4) is under-priced.
"""

import dataclasses
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maple_engine.errors import ConfigError
from maple_engine.ledger.pricing import (
    DEFAULT_BATCH_DISCOUNT,
    DEFAULT_PRIORITY_MULTIPLE,
    ModelPrice,
    Rates,
)
from maple_engine.providers.registry import known_capabilities
from maple_engine.settings import PRICES_ENV

#: The price source of a self-hosted model the price file does not price (booked at $0).
SELF_HOSTED = "self-hosted: no API price"


class UnknownModelPriceError(ConfigError):
    """No price is known for a model; raised before anything is submitted."""


class _PriceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = None
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)
    batch_discount: float | None = Field(default=None, gt=0, le=1)  # None: the provider's share
    priority_multiple: float = Field(default=DEFAULT_PRIORITY_MULTIPLE, ge=1)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, _PriceEntry]


def _families(provider: str) -> tuple[str, ...]:
    """The genai-prices providers that price ``provider``'s models, in the order tried."""
    known = known_capabilities(provider.lower())
    return known.price_families if known is not None else (provider.lower(),)


def _family(provider: str) -> str:
    return _families(provider)[0]


def _fallback_model(provider: str) -> str | None:
    known = known_capabilities(provider.lower())
    return known.price_fallback_model if known is not None else None


def _mtok(value: object) -> float | None:
    """A genai-prices price as float USD/MTok; tiered prices contribute their base tier."""
    base = getattr(value, "base", value)
    return float(base) if isinstance(base, Decimal) else None


class PriceBook:
    """Looks up a `ModelPrice` per (model, provider): overrides first, then genai-prices."""

    def __init__(self, overrides_path: str | Path | None = None) -> None:
        self.overrides_path = Path(overrides_path) if overrides_path else None
        self._overrides = _load_overrides(self.overrides_path) if self.overrides_path else {}
        self._cache: dict[tuple[str, str, bool], ModelPrice] = {}

    def price(self, model: str, provider: str, *, allow_untracked: bool = False) -> ModelPrice:
        """The price of `model` on `provider`.

        Raises `UnknownModelPriceError` when nothing prices it, unless `allow_untracked`, which
        returns a zero price whose `source` says the cost is untracked.
        """
        key = (model, provider, allow_untracked)
        if key not in self._cache:
            self._cache[key] = self._lookup(model, provider, allow_untracked)
        return self._cache[key]

    def _lookup(self, model: str, provider: str, allow_untracked: bool) -> ModelPrice:
        known = known_capabilities(provider.lower())
        if known is not None and known.self_hosted:  # the price file only: no API prices it
            found = self._override(model, _family(provider), provider)
            return found or ModelPrice(0.0, 0.0, 0.0, 0.0, source=SELF_HOSTED)
        for family in _families(provider):
            found = self._override(model, family, provider) or _with_discount(
                _genai_price(model, family), provider
            )
            if found is not None:
                return _with_cache_writes(found, provider)
        fallback_model = _fallback_model(provider)
        if fallback_model is not None:
            fallback = self.price(fallback_model, _family(provider))
            note = f"{provider}: unknown model {model!r} priced as {fallback_model}"
            return _with_source(fallback, f"{note} ({fallback.source})")
        if allow_untracked:
            return ModelPrice(0.0, 0.0, 0.0, 0.0, source=f"untracked: no price for {model!r}")
        raise UnknownModelPriceError(
            f"No price known for model {model!r} on provider {provider!r}. Add it to a price file "
            f'({{"models": {{"{model}": {{"provider": "{provider}", "input_per_mtok": ..., '
            f'"output_per_mtok": ...}}}}}}) passed by path or ${PRICES_ENV}, or run with '
            "--allow-untracked-cost to submit without tracking its cost."
        )

    def _override(self, model: str, family: str, provider: str) -> ModelPrice | None:
        entry = self._overrides.get(model)
        if entry is None:
            return None
        wanted = entry.provider
        if wanted is not None and _family(wanted) != family and wanted != provider:
            return None
        return ModelPrice(
            input_per_mtok=entry.input_per_mtok,
            output_per_mtok=entry.output_per_mtok,
            cached_input_per_mtok=_default(entry.cached_input_per_mtok, entry.input_per_mtok),
            cache_write_per_mtok=_default(entry.cache_write_per_mtok, entry.input_per_mtok),
            batch_discount=_batch_share(entry.batch_discount, provider),
            priority_multiple=entry.priority_multiple,
            source=f"price file {self.overrides_path}",
            cache_priced=entry.cached_input_per_mtok is not None,
        )


def _batch_share(stated: float | None, provider: str) -> float:
    """A price file's batch share: as stated, else ``provider``'s published one, else 0.5."""
    if stated is not None:
        return stated
    known = known_capabilities(provider.lower())
    share = known.batch_price_share if known is not None else None
    return share if share is not None else DEFAULT_BATCH_DISCOUNT


def _with_discount(price: ModelPrice | None, provider: str) -> ModelPrice | None:
    """A genai-prices ``price`` with ``provider``'s documented batch discount where the source
    publishes no batch rates (Groq's batches: 25% off)."""
    known = known_capabilities(provider.lower())
    share = known.batch_price_share if known is not None else None
    if price is None or share is None or price.batch_rates is not None:
        return price
    how = f"batch = {1 - share:.0%} published discount"
    source = price.source.replace("batch = 50% published discount", how)
    return dataclasses.replace(price, batch_discount=share, source=source)


def _with_cache_writes(price: ModelPrice, provider: str) -> ModelPrice:
    """``price`` with cache writes at the multiple of the input price ``provider``'s caching
    states (Anthropic's 1-hour TTL: 2x), in both the standard and the batch rates."""
    known = known_capabilities(provider.lower())
    multiple = known.caching.write_multiple if known and known.caching else None
    if multiple is None:
        return price
    batch = price.batch_rates
    if batch is not None:
        batch = dataclasses.replace(batch, cache_write_per_mtok=batch.input_per_mtok * multiple)
    return dataclasses.replace(
        price,
        cache_write_per_mtok=price.input_per_mtok * multiple,
        source=f"{price.source}; cache writes {multiple:g}x input",
        batch_rates=batch,
    )


def _default(value: float | None, fallback: float) -> float:
    return fallback if value is None else value


def _with_source(price: ModelPrice, source: str) -> ModelPrice:
    return ModelPrice(
        price.input_per_mtok,
        price.output_per_mtok,
        price.cached_input_per_mtok,
        price.cache_write_per_mtok,
        price.batch_discount,
        source,
        price.batch_rates,
        price.cache_priced,
        price.priority_multiple,
    )


def _load_overrides(path: Path) -> dict[str, _PriceEntry]:
    try:
        return _PriceFile.model_validate(json.loads(path.read_text())).models
    except OSError as exc:
        raise ConfigError(f"Cannot read price file {path}: {exc}. Check ${PRICES_ENV}.") from exc
    except (ValueError, ValidationError) as exc:
        raise ConfigError(
            f'Price file {path} is not valid: {exc}. Expected {{"models": {{"<model>": '
            '{"provider": "openai", "input_per_mtok": 0.15, "output_per_mtok": 0.6}}}.'
        ) from exc


def _genai_price(model: str, family: str) -> ModelPrice | None:
    """The price genai-prices' bundled snapshot holds for `model`, or None if it has none."""
    from genai_prices import __version__ as version
    from genai_prices import data_snapshot

    try:
        provider, info = data_snapshot.get_snapshot().find_provider_model(model, None, family, None)
    except LookupError:
        return None
    now = datetime.now(tz=UTC)
    published = info.get_prices(now)
    standard = _rates(published)
    if standard is None:
        return None
    batch_active = any(
        v.when == {"processing": "batch"} and (v.constraint is None or v.constraint.active(now))
        for v in info.price_variants or ()
    )
    batch_rates = _rates(info.get_prices(now, {"processing": "batch"})) if batch_active else None
    how = "batch rates from genai-prices" if batch_rates else "batch = 50% published discount"
    return ModelPrice(
        input_per_mtok=standard.input_per_mtok,
        output_per_mtok=standard.output_per_mtok,
        cached_input_per_mtok=standard.cached_input_per_mtok,
        cache_write_per_mtok=standard.cache_write_per_mtok,
        source=f"genai-prices {version} {provider.id}/{info.id}; {how}",
        batch_rates=batch_rates,
        cache_priced=_mtok(published.cache_read_mtok) is not None,
    )


def _rates(prices: Any) -> Rates | None:
    input_price, output_price = _mtok(prices.input_mtok), _mtok(prices.output_mtok)
    if input_price is None:
        return None
    return Rates(
        input_per_mtok=input_price,
        output_per_mtok=output_price or 0.0,
        cached_input_per_mtok=_default(_mtok(prices.cache_read_mtok), input_price),
        cache_write_per_mtok=_default(_mtok(prices.cache_write_mtok), input_price),
    )


def context_window(model: str, provider: str) -> int | None:
    """The model's context window in tokens per genai-prices, else the provider's documented
    input limit (``ProviderCapabilities.input_limits``), or None when neither is known."""
    from genai_prices import data_snapshot

    known = known_capabilities(provider.lower())
    listed = known.input_limit(model) if known is not None else None
    for family in _families(provider):
        try:
            _, info = data_snapshot.get_snapshot().find_provider_model(model, None, family, None)
        except LookupError:
            continue
        window = getattr(info, "context_window", None)
        return int(window) if window else listed
    return listed
