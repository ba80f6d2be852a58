"""What a Dagster user reads off an enrichment, through the real machinery (the CLI's runner on a
Dagster instance, the emulator refusing some rows): the group given, a freshness policy from
the deadline, merged's failed_rows check blocking when asked, merged's column lineage, and the
numeric metadata keys each shard and merged share, whose rows reconcile."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider

pytestmark = pytest.mark.slow  # two jobs on the emulator: ~10-25 s

INSIGHTS = ("cost_usd", "input_tokens", "output_tokens", "reasoning_tokens", "rows_failed")


def metadata_of(record: Any) -> dict[str, Any]:
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_group_freshness_blocking_lineage_and_shared_keys(tmp_path: Path) -> None:
    table = tmp_path / "items.csv"
    titles = [f"item {i % 15}" for i in range(20)]  # 5 rows repeat another row's request
    pl.DataFrame({"sku": [f"S{i}" for i in range(20)], "title": titles}).write_csv(table)
    en = enrichment(
        name="carded", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), retries={"refused": 0},
        max_requests_per_batch=6, deadline="6h", group="catalog_llm", blocking=True,
        error_failed_share=0.9,  # a WARN: merged's downstream may run
    )  # fmt: skip
    config = EmulatorConfig(batch_seconds=0, fail={"refused": 0.3}, seed=7, control_fail=0.0)
    with EmulatorServer(config) as server, dg.instance_for_test() as instance:
        resources = wire_resources(
            str(tmp_path / "store"), {"emulator": build_provider("emulator", server.url)}
        )
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        raw = en.key("raw_responses")
        shards = instance.get_dynamic_partitions(en.partitions_def.name or "")
        per_shard = {
            r.partition_key: metadata_of(r)
            for r in reversed(  # oldest first: each shard's latest stays
                instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=raw, asset_partitions=shards), limit=100
                ).records
            )
        }
        merged = metadata_of(instance.fetch_materializations(en.merged_key, limit=1).records[0])
        lineage = instance.fetch_materializations(en.merged_key, limit=1).records[0]
        strict = enrichment(
            name="strict", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
            provider="emulator", output=str(tmp_path / "strict.parquet"),
            retries={"refused": 0}, blocking=True, error_failed_share=0.05,
        )  # fmt: skip
        with pytest.raises(dg.DagsterError, match="blocking asset check failed"):
            Runner(strict, resources, instance, poll_interval_s=0.05, quiet=True).run()
        resources["maple_costs"].close()

    graph = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, resources=resources
    ).resolve_asset_graph()
    groups = {graph.get(a.key).group_name for a in en.assets}
    assert groups == {"catalog_llm"}
    policy = graph.get(en.merged_key).freshness_policy
    window = policy.fail_window.to_timedelta()  # type: ignore[union-attr]
    assert window.total_seconds() == 6 * 3600
    failed_rows = next(
        spec for c in en.checks for spec in c.check_specs if spec.name == "failed_rows"
    )
    assert failed_rows.blocking

    deps = lineage.asset_materialization.metadata["dagster/column_lineage"].value  # type: ignore[union-attr]
    by_column = {
        c: [(d.asset_key, d.column_name) for d in v] for c, v in deps.deps_by_column.items()
    }
    source = en.key("input_file")
    assert by_column["sku"] == [(source, "sku")] and by_column["title"] == [(source, "title")]
    assert by_column["llm_response"] == [(source, "title")]  # the prompt's column

    for figures in [merged, *per_shard.values()]:
        assert all(isinstance(figures.get(key), (int, float)) for key in INSIGHTS), figures
    assert merged["rows"] == 20 and 0 < merged["rows_failed"] < 20
    assert merged["repeat_and_reused_rows"] == 5  # answered by another row's request
    assert merged["rows"] == (
        sum(f["rows"] for f in per_shard.values()) + merged["repeat_and_reused_rows"]
    )
    assert merged["rows_failed"] == (
        sum(f["rows_failed"] for f in per_shard.values()) + merged["repeat_and_reused_rows_failed"]
    )
    assert merged["input_tokens"] == sum(f["input_tokens"] for f in per_shard.values()) > 0
