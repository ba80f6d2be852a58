"""The sample's maintenance assets (``maple_batch_stats``, ``maple_reconcile``) through Dagster's
machinery: not partitioned, so the whole code location's "Materialize all" offers no daily
picker; launched together without a partition key they cover yesterday and today, and a run's
config covers other days."""

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from maple_assets.definitions import defs
from maple_assets.graph.batch_stats import BATCH_STATS, batch_stats_asset
from maple_assets.graph.reconcile import RECONCILE
from maple_assets.wiring import billing_resource, maple_resources
from maple_engine.settings import Settings

MAINTENANCE = {BATCH_STATS, RECONCILE}


def _resources(tmp_path: Path) -> dict[str, Any]:
    resources = maple_resources([], storage_root=str(tmp_path / "store"))
    return resources | {"maple_billing": billing_resource("openai", Settings.load())}


def test_only_the_enrichments_shards_are_partitioned() -> None:
    """The global "Materialize all" (Dagster 1.13's ``LaunchAssetExecutionButton``) offers a
    picker of the partitions of the graph's partitioned root assets when they share one
    definition (the two daily maintenance assets did: 341 days), else a backfill of all
    partitions; no root is partitioned now, and no asset needs config (no launchpad)."""
    graph = defs.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    partitioned = {k for k in keys if graph.get(k).partitions_def}
    assert partitioned and not partitioned & MAINTENANCE
    for key in partitioned:
        assert isinstance(graph.get(key).partitions_def, dg.DynamicPartitionsDefinition), key
    roots = {k for k in keys if not graph.get(k).parent_keys & keys}
    assert roots >= MAINTENANCE and not roots & partitioned
    for assets in defs.assets or []:
        if isinstance(assets, dg.AssetsDefinition) and set(assets.keys) & MAINTENANCE:
            assert not assets.op.config_schema.as_field().is_required


def test_the_maintenance_group_materializes_without_a_partition(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    chosen = [a for a in assets if set(a.keys) & MAINTENANCE]
    today = datetime.now(UTC).date()
    with dg.instance_for_test() as instance:
        result = dg.materialize(chosen, instance=instance, resources=_resources(tmp_path))
        assert result.success
        [stats] = result.asset_materializations_for_node("maple_batch_stats")
        record = instance.get_latest_materialization_event(BATCH_STATS)
    assert record is not None and record.dagster_event is not None  # on the instance, unpartitioned
    assert record.dagster_event.partition is None
    assert stats.metadata["batches"] == dg.IntMetadataValue(0)
    reports = tmp_path / "store" / "_reports" / "batch_stats"
    assert {p.name for p in reports.glob("*.html")} == {
        f"{today - timedelta(days=1)}.html",
        f"{today}.html",
    }
    assert result.asset_materializations_for_node("maple_reconcile") == []  # no admin key: skipped


def test_a_runs_config_covers_earlier_days(tmp_path: Path) -> None:
    [stats] = [
        a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and BATCH_STATS in a.keys
    ]
    config = {"ops": {"maple_batch_stats": {"config": {"days": 3, "until": "2026-02-01"}}}}
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [stats], instance=instance, resources=_resources(tmp_path), run_config=config
        )
    assert result.success
    reports = tmp_path / "store" / "_reports" / "batch_stats"
    assert sorted(p.stem for p in reports.glob("*.html")) == [
        "2026-01-30", "2026-01-31", "2026-02-01"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"until": "Feb 1"}, "until: 'Feb 1' is not a date: give a UTC day as YYYY-MM-DD"),
        ({"days": 0}, "days\n  Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_window_is_one_line(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    [stats] = [
        a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and BATCH_STATS in a.keys
    ]
    run_config = {"ops": {"maple_batch_stats": {"config": config}}}
    with dg.instance_for_test() as instance, pytest.raises(Exception, match=message):
        dg.materialize(
            [stats], instance=instance, resources=_resources(tmp_path), run_config=run_config
        )


def test_the_automation_asks_once_a_night(tmp_path: Path) -> None:
    """Dagster's automation evaluator: nothing before 01:00 UTC, one request after it passes,
    none at the next evaluation that night."""
    location = dg.Definitions(assets=[batch_stats_asset()], resources=_resources(tmp_path))
    night = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        asked = []
        cursor = None
        for minutes in (0, 40, 50):
            result = dg.evaluate_automation_conditions(
                defs=location, instance=instance, cursor=cursor,
                evaluation_time=night + timedelta(minutes=minutes),
            )  # fmt: skip
            asked.append(result.total_requested)
            cursor = result.cursor
    assert asked == [0, 1, 0]
