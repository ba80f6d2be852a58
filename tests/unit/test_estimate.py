"""Token and cost estimates, calibrated against the emulator's counts, and the budget guard."""

from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulator.core.tokens import prompt_tokens
from maple_engine.inputs.sources import iter_blocks
from maple_engine.inputs.tokens import output_tokens_per_request
from maple_engine.job import Job
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import (
    DEFAULT_OUTPUT_ESTIMATE,
    TokenUsage,
    cost_usd,
    estimate_request_tokens,
)
from maple_engine.model import REQUEST, StopKind, Submission
from maple_engine.plan.estimate import (
    estimate_input,
    estimate_job,
    estimate_shards,
    frame_estimate,
)
from maple_engine.plan.sharding import prepare_block, write_shards
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.spec import JobSpec
from maple_engine.state import JobState, ShardSummary
from maple_engine.storage.storage import Storage
from maple_engine.submit.budget import resume_budget_stop, within_budget

UTF8 = st.characters(exclude_categories=("Cs",))  # lone surrogates are not UTF-8

CATALOG = Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"
PROMPT = "Extract the brand and size from: {title} / {description}"


def spec_for(**overrides: Any) -> JobSpec:
    values: dict[str, Any] = {
        "name": "cal",
        "prompt": PROMPT,
        "model": "gpt-4o-mini",
        "provider": "emulator",
        "source": str(CATALOG),
        "max_requests_per_batch": 60,
    }
    return JobSpec(**{**values, **overrides})


def catalog() -> pl.DataFrame:
    return pl.read_csv(CATALOG, infer_schema=False)


def emulator_prompt_tokens(frame: pl.DataFrame, anthropic: bool = False) -> int:
    """What the emulator counts for each encoded request body, summed."""
    total = 0
    for body in frame[REQUEST]:
        request = orjson.loads(body)
        total += prompt_tokens(request["messages"], request.get("system") if anthropic else None)
    return total


@pytest.mark.parametrize("system", [None, "", "You are a terse catalog assistant."])
@pytest.mark.parametrize("image", [False, True])
def test_prompt_estimate_matches_the_emulator_on_the_sample_catalog(
    system: str | None, image: bool
) -> None:
    table = catalog().with_columns(pl.lit("https://img.example/x.png").alias("image"))
    spec = spec_for(system=system, image_column="image" if image else None)
    provider = OpenAIBatchProvider(name="emulator")
    encoded = prepare_block(table, 0, spec, provider)
    actual = emulator_prompt_tokens(encoded)
    estimate = frame_estimate(table, spec, "emulator")
    error = abs(estimate.input_tokens - actual) / actual
    print(f"calibration (system={system!r}, image={image}): {estimate.input_tokens} vs {actual}")
    assert estimate.requests == table.height == 300
    assert error == 0.0


@pytest.mark.parametrize("system", [None, "", "Be brief."])
def test_prompt_estimate_matches_the_emulator_for_anthropic_bodies(system: str | None) -> None:
    table = catalog()
    spec = spec_for(provider="anthropic", system=system, model="claude-haiku-4-5")
    provider = AnthropicBatchProvider(intent_root="/nonexistent")
    encoded = prepare_block(table, 0, spec, provider)
    estimate = frame_estimate(table, spec, "anthropic")
    assert estimate.input_tokens == emulator_prompt_tokens(encoded, anthropic=True)


@given(
    texts=st.lists(st.text(UTF8, max_size=40), min_size=1, max_size=8),
    system=st.one_of(st.none(), st.text(UTF8, min_size=1, max_size=20)),
)
def test_vectorised_estimate_equals_the_scalar_formula(
    texts: list[str], system: str | None
) -> None:
    spec = spec_for(prompt="{t}", system=system)
    estimate = frame_estimate(pl.DataFrame({"t": texts}), spec, "openai")
    expected = sum(estimate_request_tokens(system, t, None)[0] for t in texts)
    assert estimate.input_tokens == expected
    assert estimate.output_tokens == DEFAULT_OUTPUT_ESTIMATE * len(texts)


def test_output_tokens_come_from_the_max_tokens_parameter() -> None:
    assert output_tokens_per_request({}) == DEFAULT_OUTPUT_ESTIMATE
    assert output_tokens_per_request({"max_tokens": 40}) == 40
    assert output_tokens_per_request({"max_completion_tokens": 12, "max_tokens": 99}) == 12
    assert output_tokens_per_request({"max_tokens": True}) == DEFAULT_OUTPUT_ESTIMATE


def test_input_estimate_plans_the_same_shards_as_sharding(tmp_path: Path) -> None:
    spec = spec_for(max_requests_per_batch=70)
    provider = OpenAIBatchProvider(name="emulator")
    from_input = estimate_input(spec, provider, iter_blocks(str(CATALOG), rows=64))
    state = JobState(Storage(str(tmp_path)), spec.name)
    shards = write_shards(state.storage, spec, iter_blocks(str(CATALOG)), provider)
    state.write_manifest(shards)
    from_shards = estimate_shards(state, spec, "emulator")
    assert from_input == from_shards
    assert from_input.shards == len(shards) == 5  # 300 rows, 70 per shard
    assert from_input.bytes == sum(s.bytes for s in shards)
    assert estimate_job(state, spec, provider) == from_shards


def test_cost_at_batch_and_realtime_prices() -> None:
    spec = spec_for(params={"max_tokens": 50})
    price = PriceBook().price("gpt-4o-mini", "openai")
    plan = frame_estimate(catalog(), spec, "emulator")
    usage = TokenUsage(input_tokens=plan.input_tokens, output_tokens=300 * 50)
    assert plan.cost(price, batch=True) == cost_usd(price, usage, batch=True)
    assert plan.cost(price, batch=False) == cost_usd(price, usage, batch=False)
    assert plan.cost(price, batch=True) == pytest.approx(plan.cost(price, batch=False) / 2)


# -- budget guard ---------------------------------------------------------------------------
def sharded_job(tmp_path: Path, budget: float | None) -> Job:
    spec = spec_for(budget_usd=budget)
    provider = OpenAIBatchProvider(name="emulator")
    state = JobState(Storage(str(tmp_path)), spec.name)
    state.write_manifest(write_shards(state.storage, spec, iter_blocks(str(CATALOG)), provider))
    return Job(spec=spec, state=state, provider=provider, prices=PriceBook())


def shard_cost(job: Job) -> float:
    return frame_estimate(catalog().head(60), job.spec, "emulator").cost(job.price(), batch=True)


def submit(job: Job, shard: str) -> None:
    sub = Submission("emulator", job.spec.name, shard, 1, f"batch_{shard}", 60, "", "now")
    job.state.record_submission(sub)


def test_budget_admits_batches_until_committed_plus_next_exceeds_it(tmp_path: Path) -> None:
    job = sharded_job(tmp_path, budget=None)
    one = shard_cost(job)
    job = sharded_job(tmp_path, budget=2.5 * one)
    assert within_budget(job, "s00000", 1)
    submit(job, "s00000")
    assert within_budget(job, "s00001", 1)
    submit(job, "s00001")
    assert not within_budget(job, "s00002", 1)
    record = job.state.stop_record()
    assert record is not None and record["kind"] == "budget"
    assert "in flight $" in record["reason"] and "rerun with a larger --budget" in record["reason"]


def test_collected_attempts_count_at_their_actual_cost(tmp_path: Path) -> None:
    job = sharded_job(tmp_path, budget=None)
    one = shard_cost(job)
    job = sharded_job(tmp_path, budget=2.5 * one)
    for shard in ("s00000", "s00001"):  # collected, actually cheap
        job.state.write_summary(shard, ShardSummary(1, 0, True, 60, 0, one / 10))
    assert within_budget(job, "s00002", 1)


def test_a_larger_budget_lifts_a_budget_stop(tmp_path: Path) -> None:
    job = sharded_job(tmp_path, budget=0.0)
    assert not within_budget(job, "s00000", 1)
    assert resume_budget_stop(job.state, 0.0) is None
    assert job.state.stop_reason() is not None
    assert resume_budget_stop(job.state, 5.0) is not None
    assert job.state.stop_reason() is None
    job.state.stop("quota", kind=StopKind.QUOTA)
    assert resume_budget_stop(job.state, None) is None  # only budget stops are lifted
