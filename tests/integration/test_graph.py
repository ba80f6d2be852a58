"""The enrichment graph through Dagster's machinery: materialize + the sensor's real tick path."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from polars.testing import assert_frame_equal

from emulator.server import EmulatorServer
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import maple_resources


def run_graph(
    en: Enrichment,
    extra_assets: list[Any],
    resources: dict[str, Any],
    instance: dg.DagsterInstance,
    *,
    shard_config: dict[str, Any] | None = None,
    failed: list[dg.ExecuteInProcessResult] | None = None,
) -> list[str]:
    """Drive the graph as the daemon would: tick the sensor, launch what it requests.
    ``shard_config``: the ``input_shards`` run's config; ``failed``: collects the runs that
    failed (without it, every run must succeed)."""
    assets = [*extra_assets, *en.assets]
    defs = dg.Definitions(
        assets=assets, asset_checks=en.checks, sensors=en.sensors, resources=resources
    )
    op = "__".join(en.key("input_shards").path)
    first = dg.materialize(
        assets,
        selection=[*(a.key for a in extra_assets), en.key("input_shards")],
        instance=instance,
        resources=resources,
        run_config={"ops": {op: {"config": shard_config}}} if shard_config else None,
    )
    assert first.success
    launched: list[str] = []
    for _ in range(50):
        with (
            dg.partition_loading_context(dynamic_partitions_store=instance),
            dg.build_sensor_context(
                instance=instance, resources=resources, definitions=defs
            ) as ctx,
        ):
            result = en.sensor.evaluate_tick(ctx)
        new = [r for r in result.run_requests or [] if r.run_key not in launched]
        for request in new:
            outcome = dg.materialize(
                [*assets, *en.checks],
                selection=request.asset_selection,
                partition_key=request.partition_key,
                instance=instance,
                resources=resources,
                tags=request.tags,  # a chained submissions run: its partition range
                run_config=request.run_config,
                raise_on_error=failed is None,
            )
            if failed is not None and not outcome.success:
                failed.append(outcome)
            assert outcome.success or failed is not None
            launched.append(str(request.run_key))
        if any(key.startswith(f"{en.spec.name}:merged:") for key in launched):
            return launched
    raise AssertionError(f"the graph did not finish: {launched}")


def test_graph_from_an_upstream_asset(
    tmp_path: Path, emulator_server: EmulatorServer, tricky_table: pl.DataFrame, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    big = (
        pl.concat([tricky_table] * 5).with_row_index("n").with_columns(pl.col("n").cast(pl.String))
    )

    @dg.asset
    def items() -> pl.DataFrame:
        return big

    en = enrichment(
        name="items_enriched",
        source=items,
        prompt="{n}: {title} / {description}",
        model="gpt-4o-mini",
        provider="emulator",
        max_requests_per_batch=7,
    )
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    with dg.instance_for_test() as instance:
        launched = run_graph(en, [items], resources, instance)
        partitions = instance.get_dynamic_partitions("items_enriched_shards")
        assert partitions == [f"s{i:05d}" for i in range(5)]  # 30 rows / 7 per shard
        # the queue's limit is being learned: one chained run sends the 5 shards in order
        submits = [k for k in launched if ":submit:" in k]
        assert [k.split(":submit:")[0] for k in submits] == ["items_enriched:s00000..s00004"]
        # every batch ended by one tick: one run collects the 5 shards
        collects = [k.split(":collect:")[0] for k in launched if ":collect:" in k]
        assert collects == ["items_enriched:s00000..s00004"]
        record = instance.get_latest_materialization_event(en.key("raw_responses"))
        assert record is not None
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(en.merged_key, "every_row_once")]
        )
        assert checks

    output = pl.read_parquet(tmp_path / "store" / "items_enriched" / "output" / "merged.parquet")
    assert_frame_equal(output.select(big.columns), big)
    expected = [
        f"echo: {n}: {t or ''} / {d or ''}"
        for n, t, d in big.select("n", "title", "description").iter_rows()
    ]
    assert output["llm_response"].to_list() == expected
    assert set(output["llm_status"]) == {"succeeded"}
    assert output["llm_attempts"].to_list() == [1] * 30
    assert output["llm_batch_id"].n_unique() == 5
    assert (output["llm_cost_usd"] > 0).all()
    assert emulator_server.stats()["bodies_billed_twice"] == 0


def test_downstream_asset_reads_merged(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    source = tmp_path / "in.csv"
    pl.DataFrame({"name": ["a", "b", "c"]}).write_csv(source)
    en = enrichment(
        name="small",
        source=str(source),
        prompt="hi {name}",
        model="gpt-4o-mini",
        provider="emulator",
    )

    @dg.asset(ins={"enriched": dg.AssetIn(key=en.merged_key)}, io_manager_key="maple_io_manager")
    def answers(enriched: pl.LazyFrame) -> pl.DataFrame:
        return enriched.select("name", "llm_response", "llm_cost_usd", "llm_reused").collect()

    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    with dg.instance_for_test() as instance:
        run_graph(en, [], resources, instance)
        result = dg.materialize(
            [*en.assets, answers], selection=[answers.key], instance=instance, resources=resources
        )
        assert result.success
        value = result.output_for_node("answers")
        event = instance.get_latest_materialization_event(en.merged_key)
        assert event is not None and event.asset_materialization is not None
        schema = event.asset_materialization.metadata["dagster/column_schema"].value
    assert value["llm_response"].to_list() == ["echo: hi a", "echo: hi b", "echo: hi c"]
    # a CSV output's counts, costs and flags come back typed: a downstream asset sums them
    assert value.schema["llm_cost_usd"] == pl.Float64 and value.schema["llm_reused"] == pl.Boolean
    assert value["llm_cost_usd"].sum() > 0
    types = {column.name: column.type for column in schema.columns}
    assert types["name"] == "String" and types["llm_cost_usd"] == "Float64"
    assert types["llm_input_tokens"] == "Int64" and types["llm_reused"] == "Boolean"
