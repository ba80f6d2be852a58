"""The prompt-cache layout of a job: shared prefix vs the model's minimum, the hints each
provider's requests carry with --cache auto and off, and the dry run's expected cache use."""

from pathlib import Path

import orjson
import polars as pl
import pytest

from maple_engine.errors import ConfigError
from maple_engine.ledger.price_book import PriceBook, UnknownModelPriceError
from maple_engine.plan.cache_layout import cache_layout, check_cache_price
from maple_engine.plan.sharding import request_spec
from maple_engine.providers.registry import build_provider, capabilities
from maple_engine.spec import JobSpec, build_spec

LONG = "Rule: answer with the brand only. " * 600  # ~5,100 tokens


def spec(provider: str, model: str, system: str | None = LONG, **extra: object) -> JobSpec:
    return JobSpec(
        name="j", prompt="Brand of {title}", model=model, provider=provider, system=system, **extra
    )


def body(job: JobSpec) -> dict[str, object]:
    provider = build_provider(job.provider, api_key="k", emulator_url="http://127.0.0.1:1")
    frame = pl.DataFrame({"title": ["oats"]})
    encoded = frame.select(provider.body_expr(request_spec(job), pl.col("title"), None)).item()
    return dict(orjson.loads(encoded))


def test_minimums_per_provider_and_model() -> None:
    claude = capabilities("anthropic").caching
    assert claude is not None
    assert [claude.minimum(m) for m in ("claude-sonnet-4-5", "claude-haiku-4-5")] == [1024, 4096]
    assert claude.minimum("claude-3-5-haiku-latest") == 2048
    openai = capabilities("openai-realtime").caching
    assert openai is not None and openai.cacheable("gpt-4o-mini", 1300) == 1280  # 128-steps
    assert openai.cacheable("gpt-4o-mini", 1000) == 0
    assert capabilities("bedrock").caching is None


def test_anthropic_marks_the_system_prompt_with_the_batch_or_realtime_ttl() -> None:
    batch = body(spec("anthropic", "claude-sonnet-4-5"))
    assert batch["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    realtime = body(spec("anthropic-realtime", "claude-sonnet-4-5"))
    assert realtime["system"] == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}
    ]
    assert body(spec("anthropic", "claude-sonnet-4-5", cache="off"))["system"] == LONG


def test_openai_carries_one_cache_key_per_job_version() -> None:
    job = spec("openai", "gpt-4o-mini")
    key = body(job)["prompt_cache_key"]
    assert key == job.cache_key() and str(key).startswith("maple-")
    changed = JobSpec(**{**job.model_dump(), "prompt": "Maker of {title}"})
    assert body(changed)["prompt_cache_key"] != key
    assert "prompt_cache_key" not in body(spec("openai", "gpt-4o-mini", cache="off"))
    assert (
        body(spec("gemini", "gemini-2.5-flash")).keys()
        == body(spec("gemini", "gemini-2.5-flash", cache="off")).keys()
    )  # implicit caching: nothing to send


def test_short_prefixes_get_no_hint_and_say_why() -> None:
    short = spec("anthropic", "claude-haiku-4-5", system="Be brief. " * 100)
    assert body(short)["system"] == "Be brief. " * 100
    assert "under the model's minimum of 4,096: not cached" in cache_layout(short).describe()
    assert cache_layout(spec("anthropic", "claude-haiku-4-5", system=None)).prefix_tokens == 0
    assert "no prompt cache" in cache_layout(spec("bedrock", "anthropic.claude-3")).describe()


def test_off_keeps_versions_apart_and_auto_keeps_old_fingerprints() -> None:
    auto, off = spec("openai", "gpt-4o-mini"), spec("openai", "gpt-4o-mini", cache="off")
    assert auto.fingerprint() != off.fingerprint()
    legacy = {k: v for k, v in auto.model_dump().items() if k != "cache"}
    assert JobSpec(**legacy).fingerprint() == auto.fingerprint()
    with pytest.raises(ConfigError, match="cache"):
        build_spec(name="j", prompt="{t}", model="m", cache="sometimes")


def test_expected_use_writes_once_per_shard_and_reads_the_rest() -> None:
    layout = cache_layout(spec("anthropic", "claude-sonnet-4-5"))
    usage = layout.expected_usage(requests=1000, shards=2)
    per = layout.cacheable_tokens
    assert per == layout.prefix_tokens > 5000
    assert (usage.cached_input_tokens, usage.cache_write_tokens) == (998 * per, 2 * per)
    openai = cache_layout(spec("openai", "gpt-4o-mini")).expected_usage(1000, 2)
    assert openai.cache_write_tokens == 0  # OpenAI's writes are free
    assert (
        cache_layout(spec("openai", "gpt-4o-mini", cache="off")).expected_usage(9, 1).input_tokens
        == 0
    )


def test_flex_providers_ask_for_the_flex_tier_at_batch_prices() -> None:
    openai_flex = body(spec("openai-flex", "gpt-4o-mini", system=None))
    assert openai_flex["service_tier"] == "flex"
    assert body(spec("gemini-flex", "gemini-2.5-flash", system=None))["serviceTier"] == "flex"
    for name in ("openai-flex", "gemini-flex"):
        assert capabilities(name).batch_prices and capabilities(name).mode == "realtime"
    assert capabilities("openai").flex_twin == "openai-flex"
    assert capabilities("gemini").flex_twin == "gemini-flex"


def test_a_cached_job_needs_a_cache_read_price(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    entry = {"provider": "anthropic", "input_per_mtok": 1.0, "output_per_mtok": 5.0}
    prices.write_text(orjson.dumps({"models": {"claude-house": entry}}).decode())
    job = spec("anthropic", "claude-house")
    price = PriceBook(prices).price("claude-house", "anthropic")
    with pytest.raises(UnknownModelPriceError, match="cached_input_per_mtok"):
        check_cache_price(job, price)
    check_cache_price(spec("anthropic", "claude-house", cache="off"), price)
    check_cache_price(spec("anthropic", "claude-house", allow_untracked_cost=True), price)
    check_cache_price(spec("anthropic", "claude-house", system="short"), price)
    entry["cached_input_per_mtok"] = 0.1
    prices.write_text(orjson.dumps({"models": {"claude-house": entry}}).decode())
    check_cache_price(job, PriceBook(prices).price("claude-house", "anthropic"))
    check_cache_price(job, PriceBook().price("claude-haiku-4-5", "anthropic"))


def test_a_job_without_a_system_prompt_says_there_is_nothing_to_cache() -> None:
    spec = JobSpec(name="plain", prompt="About {title}", model="gpt-4o-mini", provider="openai")
    assert cache_layout(spec).describe() == (
        "nothing to cache: no --system prompt shared by every row"
    )
