"""Prices, usage semantics per provider, batch discounts, overrides and cost arithmetic."""

import json
import math
from pathlib import Path

import polars as pl
import pytest
from genai_prices import Usage, calc_price
from hypothesis import given
from hypothesis import strategies as st

from maple_engine.errors import ConfigError
from maple_engine.ledger.price_book import PriceBook, UnknownModelPriceError
from maple_engine.ledger.pricing import (
    DEFAULT_OUTPUT_ESTIMATE,
    ModelPrice,
    Rates,
    TokenUsage,
    cost_expr,
    cost_usd,
    estimate_request_tokens,
    estimate_tokens,
    uncached_cost_usd,
)
from maple_engine.settings import Settings


@pytest.fixture
def book(monkeypatch: pytest.MonkeyPatch) -> PriceBook:
    monkeypatch.delenv("MAPLE_PRICES", raising=False)
    return PriceBook()


def write_prices(tmp_path: Path, models: dict[str, dict[str, object]]) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": models}))
    return path


# -- usage semantics -------------------------------------------------------------------------


def test_openai_prompt_tokens_include_cached_tokens() -> None:
    usage = TokenUsage.from_openai(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "total_tokens": 1100,
            "prompt_tokens_details": {"cached_tokens": 400, "audio_tokens": 0},
        }
    )
    assert usage == TokenUsage(input_tokens=1000, cached_input_tokens=400, output_tokens=100)
    assert usage.fresh_input_tokens == 600


def test_openai_responses_api_usage_and_missing_details() -> None:
    responses = {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 10},
        "output_tokens": 5,
    }
    assert TokenUsage.from_openai(responses) == TokenUsage(50, 10, 0, 5)
    assert TokenUsage.from_openai({"prompt_tokens": 7, "completion_tokens": 2}) == TokenUsage(
        7, 0, 0, 2
    )


def test_anthropic_input_tokens_exclude_cache_reads_and_writes() -> None:
    usage = TokenUsage.from_anthropic(
        {
            "input_tokens": 100,
            "cache_read_input_tokens": 400,
            "cache_creation_input_tokens": 500,
            "output_tokens": 100,
        }
    )
    assert usage == TokenUsage(
        1000, cached_input_tokens=400, cache_write_tokens=500, output_tokens=100
    )
    assert usage.fresh_input_tokens == 100


def test_usage_rejects_inconsistent_counts() -> None:
    with pytest.raises(ValueError, match="exceed input tokens"):
        TokenUsage(input_tokens=10, cached_input_tokens=11)
    with pytest.raises(ValueError, match="negative"):
        TokenUsage(input_tokens=10, output_tokens=-1)


# -- price math, both providers ------------------------------------------------------------------


def test_openai_cached_tokens_priced_as_cache_reads(book: PriceBook) -> None:
    price = book.price("gpt-4o-mini", "openai")
    usage = TokenUsage.from_openai(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 100,
            "prompt_tokens_details": {"cached_tokens": 400},
        }
    )
    expected = (600 * 0.15 + 400 * 0.075 + 100 * 0.6) / 1e6
    assert cost_usd(price, usage, batch=False) == pytest.approx(expected, rel=1e-12)
    # The same usage, priced by genai-prices itself (its input_tokens include cache reads).
    reference = calc_price(
        Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=100),
        model_ref="gpt-4o-mini",
        provider_id="openai",
    )
    assert cost_usd(price, usage, batch=False) == pytest.approx(float(reference.total_price))


def test_anthropic_cache_reads_and_writes_priced_separately(book: PriceBook) -> None:
    price = book.price("claude-haiku-4-5", "anthropic-realtime")  # 5-minute cache writes
    usage = TokenUsage.from_anthropic(
        {
            "input_tokens": 100,
            "cache_read_input_tokens": 400,
            "cache_creation_input_tokens": 500,
            "output_tokens": 100,
        }
    )
    expected = (100 * 1.0 + 400 * 0.1 + 500 * 1.25 + 100 * 5.0) / 1e6
    assert cost_usd(price, usage, batch=False) == pytest.approx(expected, rel=1e-12)
    reference = calc_price(
        Usage(input_tokens=1000, cache_read_tokens=400, cache_write_tokens=500, output_tokens=100),
        model_ref="claude-haiku-4-5",
        provider_id="anthropic",
    )
    assert cost_usd(price, usage, batch=False) == pytest.approx(float(reference.total_price))
    # Batch: Anthropic bills all usage, cache tokens included, at 50%.
    assert cost_usd(price, usage, batch=True) == pytest.approx(expected / 2, rel=1e-12)


def test_anthropic_batch_cache_prices_stack_with_the_batch_discount(book: PriceBook) -> None:
    """In Message Batches a cache read costs 5% of the list input price, a 1-hour write 100%."""
    price = book.price("claude-haiku-4-5", "anthropic")
    usage = TokenUsage.from_anthropic(
        {"input_tokens": 0, "cache_read_input_tokens": 1_000_000, "output_tokens": 0}
    )
    assert cost_usd(price, usage, batch=True) == pytest.approx(0.05 * 1.0, rel=1e-12)
    write = TokenUsage.from_anthropic({"input_tokens": 0, "cache_creation_input_tokens": 10**6})
    assert cost_usd(price, write, batch=True) == pytest.approx(2.0 * 1.0 / 2, rel=1e-12)
    assert uncached_cost_usd(price, usage, batch=True) == pytest.approx(0.5, rel=1e-12)


def test_batch_rates_from_genai_prices_where_published(book: PriceBook) -> None:
    price = book.price("gpt-4o-mini", "openai")
    assert price.batch_rates is not None
    usage = TokenUsage(input_tokens=1000, output_tokens=100)
    assert cost_usd(price, usage, batch=True) == pytest.approx(
        cost_usd(price, usage, batch=False) / 2, rel=1e-12
    )
    # OpenAI's Batch table publishes no cached-input rate for gpt-4o-mini: genai-prices keeps
    # the standard cached rate, and so do we.
    assert price.batch_rates.cached_input_per_mtok == 0.075
    reference = calc_price(
        Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=100),
        model_ref="gpt-4o-mini",
        provider_id="openai",
        price_context={"processing": "batch"},
    )
    cached = TokenUsage(input_tokens=1000, cached_input_tokens=400, output_tokens=100)
    assert cost_usd(price, cached, batch=True) == pytest.approx(float(reference.total_price))


def test_published_batch_discount_applied_when_source_has_no_batch_price(book: PriceBook) -> None:
    price = book.price("text-embedding-3-small", "openai")
    assert price.batch_rates is None
    assert "50%" in price.source
    usage = TokenUsage(input_tokens=1_000_000)
    assert cost_usd(price, usage, batch=False) == pytest.approx(0.02)
    assert cost_usd(price, usage, batch=True) == pytest.approx(0.01)


def test_realtime_provider_names_share_their_family_prices(book: PriceBook) -> None:
    assert book.price("gpt-4o-mini", "openai-realtime") == book.price("gpt-4o-mini", "openai")
    realtime, batch = (
        book.price("claude-haiku-4-5", p) for p in ("anthropic-realtime", "anthropic")
    )
    assert (realtime.input_per_mtok, realtime.output_per_mtok) == (1.0, 5.0)
    assert (batch.input_per_mtok, batch.output_per_mtok) == (1.0, 5.0)
    # Batches write 1-hour cache entries (2x input); real-time the 5-minute ones (1.25x).
    assert (batch.cache_write_per_mtok, realtime.cache_write_per_mtok) == (2.0, 1.25)
    assert book.price("gpt-4o-mini-2024-07-18", "openai").input_per_mtok == 0.15


def test_emulator_prices_known_models_and_falls_back_to_gpt_4o_mini(book: PriceBook) -> None:
    assert book.price("gpt-4.1", "emulator").input_per_mtok == 2.0
    assert book.price("claude-haiku-4-5", "emulator").input_per_mtok == 1.0
    fallback = book.price("echo-model", "emulator")
    assert fallback.input_per_mtok == 0.15
    assert "echo-model" in fallback.source
    assert "gpt-4o-mini" in fallback.source


# -- overrides and unknown models ----------------------------------------------------------------


def test_price_file_adds_and_overrides_models(tmp_path: Path) -> None:
    path = write_prices(
        tmp_path,
        {
            "my-model": {"provider": "openai", "input_per_mtok": 1.0, "output_per_mtok": 4.0},
            "gpt-4o-mini": {
                "input_per_mtok": 9.0,
                "output_per_mtok": 9.0,
                "cached_input_per_mtok": 1.0,
                "batch_discount": 0.25,
            },
        },
    )
    book = PriceBook(path)
    mine = book.price("my-model", "openai")
    assert (mine.cached_input_per_mtok, mine.cache_write_per_mtok) == (1.0, 1.0)  # default: input
    assert str(path) in mine.source
    overridden = book.price(
        "gpt-4o-mini", "anthropic"
    )  # no provider in the entry: applies anywhere
    assert overridden.batch_rates is None
    usage = TokenUsage(input_tokens=2_000_000, cached_input_tokens=1_000_000)
    assert cost_usd(overridden, usage, batch=False) == pytest.approx(10.0)
    assert cost_usd(overridden, usage, batch=True) == pytest.approx(2.5)


def test_a_price_file_entry_without_a_batch_share_takes_the_providers(tmp_path: Path) -> None:
    """DeepInfra bills batches at 80% of its real-time price: an entry saying no share is
    booked so; an entry for a provider with no published share takes 0.5; a stated one wins."""
    rates = {"input_per_mtok": 1.0, "output_per_mtok": 1.0}
    path = write_prices(
        tmp_path,
        {
            "meta-llama/Meta-Llama-3.1-8B-Instruct": {"provider": "deepinfra", **rates},
            "my-model": {"provider": "openai", **rates},
            "stated": {"provider": "deepinfra", "batch_discount": 0.6, **rates},
        },
    )
    book = PriceBook(path)
    usage = TokenUsage(input_tokens=1_000_000)
    llama = book.price("meta-llama/Meta-Llama-3.1-8B-Instruct", "deepinfra")
    assert cost_usd(llama, usage, batch=True) == pytest.approx(0.8)
    assert cost_usd(llama, usage, batch=False) == pytest.approx(1.0)
    assert cost_usd(book.price("my-model", "openai"), usage, batch=True) == pytest.approx(0.5)
    assert cost_usd(book.price("stated", "deepinfra"), usage, batch=True) == pytest.approx(0.6)


def test_price_file_from_env_and_provider_must_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_prices(
        tmp_path, {"my-model": {"provider": "anthropic", "input_per_mtok": 1, "output_per_mtok": 2}}
    )
    monkeypatch.setenv("MAPLE_PRICES", str(path))
    book = PriceBook(Settings.load().prices)  # as the entry points build it
    assert book.price("my-model", "anthropic-realtime").output_per_mtok == 2.0
    with pytest.raises(UnknownModelPriceError):
        book.price("my-model", "openai")


def test_example_price_file_is_valid() -> None:
    example = Path(__file__).parents[2] / "resources" / "price_overrides_example.json"
    book = PriceBook(example)
    assert book.price("my-finetuned-mini", "openai").input_per_mtok == 0.3


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"models": {"m": {"input_per_mtok": 1}}}),
        json.dumps({"models": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}),
        json.dumps({"models": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "typo": 1}}}),
    ],
)
def test_invalid_price_file_is_a_config_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="not valid"):
        PriceBook(path)
    with pytest.raises(ConfigError, match="Cannot read"):
        PriceBook(tmp_path / "missing.json")


def test_unknown_model_error_says_what_to_do(book: PriceBook) -> None:
    with pytest.raises(UnknownModelPriceError) as info:
        book.price("gpt-nonexistent-9", "openai")
    message = str(info.value)
    assert "gpt-nonexistent-9" in message
    assert "MAPLE_PRICES" in message
    assert "--allow-untracked-cost" in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownModelPriceError):
        book.price("gpt-4o-mini", "no-such-provider")


def test_untracked_cost_is_an_explicit_opt_in(book: PriceBook) -> None:
    price = book.price("gpt-nonexistent-9", "openai", allow_untracked=True)
    assert cost_usd(price, TokenUsage(1000, 0, 0, 1000), batch=False) == 0.0
    assert "untracked" in price.source
    with pytest.raises(UnknownModelPriceError):
        book.price("gpt-nonexistent-9", "openai")


# -- vectorised cost and properties ----------------------------------------------------------------

PRICES = [
    ModelPrice(0.15, 0.6, 0.075, 0.15),
    ModelPrice(
        3.0,
        15.0,
        0.3,
        3.75,
        batch_discount=0.5,
        source="x",
        batch_rates=Rates(1.5, 7.5, 0.15, 1.875),
    ),
    ModelPrice(0.1, 0.4, 0.025, 0.1, batch_discount=0.37),
]


@pytest.mark.parametrize("price", PRICES)
@pytest.mark.parametrize("batch", [False, True])
def test_cost_expr_is_bit_identical_to_cost_usd(price: ModelPrice, batch: bool) -> None:
    n = 50_000
    cached = pl.Series(range(n)) * 7919 % 3000
    frame = pl.DataFrame(
        {
            "input_tokens": cached + pl.Series(range(n)) * 104_729 % 20_000 + 1500,
            "cached_input_tokens": cached,
            "cache_write_tokens": pl.Series(range(n)) * 31 % 1500,
            "output_tokens": pl.Series(range(n)) * 613 % 4000,
        }
    )
    vectorised = frame.select(cost_expr(price, batch))["cost_usd"].to_list()
    scalar = [cost_usd(price, TokenUsage(*row), batch) for row in frame.iter_rows()]
    assert vectorised == scalar  # exact float equality, row by row


usages = st.builds(
    lambda fresh, cached, write, out: TokenUsage(fresh + cached + write, cached, write, out),
    *(st.integers(0, 10_000_000) for _ in range(4)),
)


@given(a=usages, b=usages, price=st.sampled_from(PRICES), batch=st.booleans())
def test_cost_is_linear_in_usage(
    a: TokenUsage, b: TokenUsage, price: ModelPrice, batch: bool
) -> None:
    total = cost_usd(price, a + b, batch)
    assert math.isclose(
        total, cost_usd(price, a, batch) + cost_usd(price, b, batch), rel_tol=1e-12, abs_tol=1e-15
    )
    assert cost_usd(price, TokenUsage(), batch) == 0.0
    assert cost_usd(price, a, batch=True) <= cost_usd(price, a, batch=False) + 1e-15


# -- estimates ----------------------------------------------------------------------------------


def test_estimate_tokens_heuristic() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [1, 1, 1, 2, 100]


def test_estimate_request_tokens() -> None:
    assert estimate_request_tokens(None, "hello", None) == (2 + 3 + 3, DEFAULT_OUTPUT_ESTIMATE)
    assert estimate_request_tokens("be brief", "hello", 50) == (2 + 3 + 2 + 3 + 3, 50)


@pytest.mark.parametrize("system", [None, "", "You extract product attributes as JSON."])
@pytest.mark.parametrize(
    "user", ["", "hi", "Extract the brand and size from: Acme / 500 ml bottle"]
)
def test_estimate_matches_the_emulator_count(system: str | None, user: str) -> None:
    tokens = pytest.importorskip("emulator.core.tokens")
    expected = tokens.prompt_tokens([{"role": "user", "content": user}], system=system)
    assert estimate_request_tokens(system, user, None)[0] == expected


def test_a_self_hosted_model_is_priced_from_the_price_file_only(tmp_path: Path) -> None:
    """A server of one's own has no API price: a model the price file names is priced from it,
    any other (even one an API prices, like gpt-4o-mini) costs $0 and says why."""
    prices = tmp_path / "prices.json"
    entry = {"provider": "openai-server", "input_per_mtok": 0.02, "output_per_mtok": 0.04}
    prices.write_text(json.dumps({"models": {"llama-3-8b": entry}}))
    book = PriceBook(prices)
    assert book.price("llama-3-8b", "openai-server").input_per_mtok == 0.02
    free = book.price("gpt-4o-mini", "openai-server")
    assert (free.input_per_mtok, free.output_per_mtok) == (0.0, 0.0)
    assert free.source == "self-hosted: no API price"
    assert book.price("gpt-4o-mini", "openai").input_per_mtok > 0


def test_the_priority_tier_costs_twice_the_standard_price_unless_the_price_file_says(
    tmp_path: Path,
) -> None:
    book = PriceBook(
        write_prices(tmp_path, {"my-model": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}})
    )
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    price = book.price("my-model", "openai")
    assert cost_usd(price.at_priority(), usage, batch=False) == pytest.approx(10.0)
    assert cost_usd(price.at_priority(), usage, batch=True) == pytest.approx(10.0)  # never batch
    assert "priority tier = 2x standard" in price.at_priority().source
    entry = {"input_per_mtok": 1.0, "output_per_mtok": 4.0, "priority_multiple": 1.5}
    cheaper = PriceBook(write_prices(tmp_path, {"my-model": entry})).price("my-model", "openai")
    assert cost_usd(cheaper.at_priority(), usage, batch=False) == pytest.approx(7.5)
    with pytest.raises(ConfigError, match="priority_multiple"):
        PriceBook(write_prices(tmp_path, {"m": {**entry, "priority_multiple": 0.5}}))
