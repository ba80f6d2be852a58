"""A living enrichment through Dagster's machinery, as a user works in the UI.

The upstream table changes, the enrichment shows stale and a re-materialization sends only the
changed rows; a prompt edited in code is a new version, not an error; the downstream asset of
``merged`` is requested by its automation condition, not by hand.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import maple_resources

TABLE: dict[str, pl.DataFrame] = {}


@dg.asset
def items() -> pl.DataFrame:
    return TABLE["items"]


@dg.asset(
    ins={"enriched": dg.AssetIn(key=dg.AssetKey(["living", "merged"]))},
    io_manager_key="maple_io_manager",
    automation_condition=dg.AutomationCondition.eager(),
)
def report(enriched: pl.LazyFrame) -> pl.DataFrame:
    return enriched.select(pl.len().alias("rows")).collect()


def catalog(n: int) -> pl.DataFrame:
    return pl.DataFrame({"sku": [f"S{i}" for i in range(n)], "title": [f"t{i}" for i in range(n)]})


def living(prompt: str) -> Enrichment:
    return enrichment(
        name="living",
        source=items,
        prompt=prompt,
        model="gpt-4o-mini",
        provider="emulator",
        max_requests_per_batch=8,
    )


def definitions(en: Enrichment, resources: dict[str, Any]) -> dg.Definitions:
    return dg.Definitions(
        assets=[items, *en.assets, report],
        asset_checks=en.checks,
        sensors=en.sensors,
        resources=resources,
    )


def materialize(defs: dg.Definitions, instance: dg.DagsterInstance, *keys: Any, **kw: Any) -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance, asset_selection=list(keys), raise_on_error=True, **kw
    )
    assert result.success


def drive(
    defs: dg.Definitions, en: Enrichment, instance: dg.DagsterInstance, resources: dict[str, Any]
) -> None:
    """Tick the sensor and launch what it asks for until it requests ``merged``."""
    launched: set[str] = set()
    for _ in range(40):
        with (
            dg.partition_loading_context(dynamic_partitions_store=instance),
            dg.build_sensor_context(
                instance=instance, resources=resources, definitions=defs
            ) as ctx,
        ):
            result = en.sensor.evaluate_tick(ctx)
        for request in result.run_requests or []:
            if request.run_key in launched:
                continue
            launched.add(str(request.run_key))
            materialize(
                defs,
                instance,
                *request.asset_selection,
                partition_key=request.partition_key,
                tags=request.tags,  # a chained submissions run: its partition range
                run_config=request.run_config,
            )
            if ":merged:" in str(request.run_key):
                return
    raise AssertionError(f"the sensor never requested merged: {sorted(launched)}")


def stale(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> bool:
    graph = defs.resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    return resolver.get_status(key) == StaleStatus.STALE


def merged_rows(tmp_path: Path) -> pl.DataFrame:
    return pl.read_parquet(tmp_path / "store" / "living" / "output" / "merged.parquet")


@pytest.mark.slow  # ~35 s
def test_upstream_change_and_prompt_edit_in_the_ui(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    TABLE["items"] = catalog(20)
    en = living("Describe {title}")
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    defs = definitions(en, resources)
    shards = en.key("input_shards")
    with dg.instance_for_test() as instance:
        materialize(defs, instance, items.key, shards)
        before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert before.get_num_requested(report.key) == 0  # merged is missing: nothing yet
        drive(defs, en, instance, resources)
        assert emulator_server.stats()["requests_received"] == 20
        assert merged_rows(tmp_path).height == 20

        # The downstream asset refreshes on its own once merged is materialized.
        evaluation = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=before.cursor
        )
        assert evaluation.get_num_requested(report.key) == 1

        # The upstream table grows and two rows change: the enrichment is stale ...
        grown = catalog(50).with_columns(
            pl.when(pl.col("sku").is_in(["S1", "S2"]))
            .then(pl.col("title") + "!")
            .otherwise(pl.col("title"))
            .alias("title")
        )
        TABLE["items"] = grown
        materialize(defs, instance, items.key)
        assert stale(defs, instance, shards)
        # ... and re-materializing it sends only the changed and the new rows.
        materialize(defs, instance, shards)
        drive(defs, en, instance, resources)
        assert emulator_server.stats()["requests_received"] == 20 + 2 + 30
        out = merged_rows(tmp_path)
        assert out["sku"].to_list() == grown["sku"].to_list()
        assert out["llm_reused"].sum() == 18
        record = instance.get_latest_materialization_event(shards)
        assert record is not None and record.asset_materialization is not None
        metadata = record.asset_materialization.metadata
        assert metadata["rows"].value == 50 and metadata["to_send"].value == 32
        merged = instance.get_latest_materialization_event(en.merged_key)
        assert merged is not None and merged.asset_materialization is not None
        told = merged.asset_materialization.metadata
        assert Path(str(told["path"].value)) == tmp_path / "store/living/output/merged.parquet"
        assert told["sent"].value == 32 and told["reused"].value == 18
        assert told["cost_usd"].value == round(told["cost_usd"].value, 6) > 0

        # A prompt edited in code: a new code version, stale, and a run without error.
        edited = living("Name the brand of {title}")
        resources = maple_resources([edited], str(tmp_path / "store"))
        defs = definitions(edited, resources)
        assert stale(defs, instance, shards)
        materialize(defs, instance, shards)
        drive(defs, edited, instance, resources)
        assert emulator_server.stats()["requests_received"] == 52 + 50
        assert merged_rows(tmp_path)["llm_response"][0] == "echo: Name the brand of t0"
    assert emulator_server.stats()["bodies_billed_twice"] == 0


@pytest.mark.slow  # ~13-18 s: two graph runs
def test_a_rerun_of_a_file_has_partitions_for_the_rows_it_sends_only(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    source = tmp_path / "items.parquet"
    catalog(20).write_parquet(source)
    en = enrichment(
        name="filed",
        source=str(source),
        prompt="Describe {title}",
        model="gpt-4o-mini",
        provider="emulator",
        max_requests_per_batch=8,
    )
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    defs = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, sensors=en.sensors, resources=resources
    )
    shards, pdef = en.key("input_shards"), str(en.partitions_def.name)
    with dg.instance_for_test() as instance:
        materialize(defs, instance, shards)
        assert instance.get_dynamic_partitions(pdef) == ["s00000", "s00001", "s00002"]
        drive(defs, en, instance, resources)
        sent = emulator_server.stats()["requests_received"]

        edited = pl.col("sku").is_in(["S1", "S12"])
        grown = catalog(30).with_columns(
            pl.when(edited).then(pl.col("title") + "!").otherwise(pl.col("title")).alias("title")
        )
        grown.write_parquet(source)
        materialize(defs, instance, shards)
        # 2 edited + 10 new rows: two shards of them, none for the 18 rows filled from the store
        assert instance.get_dynamic_partitions(pdef) == ["v2-s00000", "v2-s00001"]
        drive(defs, en, instance, resources)
        assert emulator_server.stats()["requests_received"] - sent == 12

        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, asset_selection=[en.merged_key]
        )
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks["every_row_once"] and checks["same_rows_as_input"], checks
        out = pl.read_parquet(tmp_path / "store" / "filed" / "output" / "merged.parquet")
        assert out.select(grown.columns).equals(grown)
        assert out["llm_response"].to_list() == [f"echo: Describe {t}" for t in grown["title"]]
        assert out["llm_reused"].sum() == 18

        # the file edited after its shards were cut: merged refuses, naming the fix
        pl.concat([grown, catalog(31).tail(1)]).write_parquet(source)
        stale_merge = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, asset_selection=[en.merged_key], raise_on_error=False
        )
        assert not stale_merge.success
        failure = stale_merge.get_step_failure_events()[0].step_failure_data.error
        assert failure is not None and "changed after its shards were cut" in str(failure)
        assert "Run `maple enrich` again" in str(failure)
