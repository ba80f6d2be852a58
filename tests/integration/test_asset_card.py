"""What a Dagster user reads of a job's assets: kinds (the provider, polars, the stored format),
the owner ``team:NAME``, a description, the code reference of the declaration, and on
``merged``'s materialization its column schema (input columns, then ``llm_*`` with their
meaning) and row count."""

import inspect
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.graph.card import COLUMN_MEANINGS
from maple_assets.wiring import maple_resources
from tests.integration.test_graph import run_graph

STAGES = ("input_shards", "submissions", "raw_responses", "merged")


def test_every_asset_shows_kinds_owner_description_and_its_declaration(tmp_path: Path) -> None:
    source = tmp_path / "items.csv"
    pl.DataFrame({"title": ["a"]}).write_csv(source)
    line = 1 + inspect.currentframe().f_lineno  # type: ignore[union-attr]
    job = enrichment("card", str(source), "{title}", "gpt-4o-mini", provider="emulator", team="ml")
    defs = dg.Definitions(assets=job.assets, resources=maple_resources([job]))
    graph = defs.resolve_asset_graph()
    for stage in STAGES:
        node = graph.get(job.key(stage))
        stored = "csv" if stage == "merged" else "parquet"  # a CSV input makes a CSV output
        assert node.kinds == {"emulator", "polars", stored}, stage
        assert node.owners == ["team:ml"], stage
        assert node.description, stage
        (reference,) = node.metadata["dagster/code_references"].code_references
        assert (reference.file_path, reference.line_number) == (__file__, line), stage


def test_the_sample_references_each_declaration_python_or_yaml() -> None:
    from maple_assets import definitions

    graph = definitions.defs.resolve_asset_graph()
    here = Path(definitions.__file__)

    def references(name: str) -> set[str]:
        metadata = graph.get(dg.AssetKey([name, "merged"])).metadata
        return {ref.file_path for ref in metadata["dagster/code_references"].code_references}

    assert references("product_attributes") == {str(here)}
    assert references("product_tags") == {str(here.parent / "defs/product_tags/defs.yaml")}
    tags = graph.get(dg.AssetKey(["product_tags", "merged"]))
    assert tags.owners == ["team:catalog"] and "polars" in tags.kinds


def test_merged_carries_its_column_schema_and_row_count(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    table = pl.DataFrame({"sku": ["1", "2", "3"], "title": ["a", "b", "c"]})

    @dg.asset
    def items() -> pl.DataFrame:
        return table

    job = enrichment("carded", items, "{title}", "gpt-4o-mini", provider="emulator")
    resources = maple_resources([job], storage_root=str(tmp_path / "store"))
    with dg.instance_for_test() as instance:
        run_graph(job, [items], resources, instance)
        event = instance.get_latest_materialization_event(job.merged_key)
        assert event is not None and event.asset_materialization is not None
        metadata = event.asset_materialization.metadata
    assert metadata["dagster/row_count"].value == 3
    uri = metadata["dagster/uri"].value
    assert uri.startswith("file:///") and uri.endswith(Path(metadata["path"].value).name), uri
    columns = metadata["dagster/column_schema"].value.columns
    names = [c.name for c in columns]
    assert names[:2] == ["sku", "title"] and "llm_response" in names and "llm_status" in names
    meanings = {c.name: c.description for c in columns}
    assert meanings["sku"] is None
    assert all(meanings[name] == COLUMN_MEANINGS[name] for name in names[2:])
    assert {c.name: c.type for c in columns}["llm_attempts"].startswith("Int")
