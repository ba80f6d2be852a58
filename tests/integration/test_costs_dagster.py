"""The CostTracker as a Dagster resource: configured, used by an asset, torn down."""

from pathlib import Path

import dagster as dg
import pytest

from maple_engine.ledger.attempt_cost import AttemptCost
from resources.costs import CostTracker


@dg.asset
def billed_shard(costs: CostTracker) -> dg.MaterializeResult:
    costs.record(
        AttemptCost(
            job="job-d",
            team="t",
            model="gpt-4o-mini",
            provider="openai",
            mode="realtime",
            shard="0",
            attempt=0,
            batch_id=None,
            requests=2,
            input_tokens=20,
            cached_input_tokens=0,
            cache_write_tokens=0,
            output_tokens=4,
            cost_usd=0.01,
            realtime_cost_usd=0.01,
        )
    )
    return dg.MaterializeResult(metadata={"cost_usd": costs.job_total("job-d")})


def test_asset_records_through_the_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_URL", f"sqlite:///{tmp_path}/ledger.sqlite")
    resource = CostTracker(database_url=dg.EnvVar("LEDGER_URL"))
    result = dg.materialize([billed_shard], resources={"costs": resource})
    assert result.success
    [mat] = result.asset_materializations_for_node("billed_shard")
    assert mat.metadata["cost_usd"] == dg.FloatMetadataValue(0.01)
    with CostTracker(database_url=f"sqlite:///{tmp_path}/ledger.sqlite") as tracker:
        assert tracker.job_total("job-d") == 0.01
