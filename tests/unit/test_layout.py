"""Always-on guards: import names resolve here, definitions load, the asset graph's shape."""

from pathlib import Path

import dagster as dg

import emulator
import maple_assets
import maple_engine
import partitions
import resources

ROOT = Path(__file__).resolve().parents[2]


def test_generic_package_names_resolve_to_this_repository() -> None:
    for package in (maple_engine, maple_assets, resources, partitions, emulator):
        assert Path(package.__file__ or "").resolve().is_relative_to(ROOT), package


def test_definitions_load_with_the_example_graph() -> None:
    from maple_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == {
        "grocery_catalog_file",
        "grocery_catalog",
        "product_attributes/input_shards",
        "product_attributes/submissions",
        "product_attributes/raw_responses",
        "product_attributes/merged",
        "category_report",
        "maple_batch_stats",
        "maple_reconcile",
        "catalog_vectors/input_shards",
        "catalog_vectors/submissions",
        "catalog_vectors/raw_responses",
        "catalog_vectors/merged",
        "near_duplicates",
        "product_tags/input_shards",  # declared in maple_assets/defs/product_tags/defs.yaml
        "product_tags/submissions",
        "product_tags/raw_responses",
        "product_tags/merged",
    }
    merged = graph.get(dg.AssetKey(["product_attributes", "merged"]))
    assert {k.to_user_string() for k in merged.parent_keys} == {"product_attributes/raw_responses"}
    shards = graph.get(dg.AssetKey(["product_attributes", "raw_responses"]))
    assert isinstance(shards.partitions_def, dg.DynamicPartitionsDefinition)
    assert defs.resolve_sensor_def("product_attributes_sensor") is not None
    assert defs.resolve_sensor_def("catalog_vectors_sensor") is not None
    tags = graph.get(dg.AssetKey(["product_tags", "input_shards"]))
    assert {k.to_user_string() for k in tags.parent_keys} == {"grocery_catalog"}
    assert defs.resolve_sensor_def("product_tags_sensor") is not None
    near = graph.get(dg.AssetKey("near_duplicates"))
    assert {k.to_user_string() for k in near.parent_keys} == {"catalog_vectors/merged"}


def test_every_check_says_when_it_runs_and_that_it_is_not_yet_evaluated_before() -> None:
    """A check that has not run reads "Not evaluated" in the UI, and its description says so
    (before anything ran, nothing looks passed); each raw_responses has its per-shard check."""
    from maple_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    checks = {k.to_user_string(): graph.get_check_spec(k) for k in graph.asset_check_keys}
    assert "product_attributes/raw_responses:failed_rows" in checks
    assert checks["product_attributes/raw_responses:failed_rows"].partitions_def is not None
    for name, spec in checks.items():
        assert (spec.description or "").endswith("; until then, not yet evaluated."), name


def test_the_code_location_module_holds_one_definitions_object() -> None:
    """``dagster dev -m maple_assets.definitions`` (no attribute) loads the one there is."""
    from maple_assets import definitions

    found = [v for v in vars(definitions).values() if isinstance(v, dg.Definitions)]
    assert found == [definitions.defs]


def test_dagster_validates_the_workspace() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Validation successful" in result.stderr + result.stdout


def test_the_code_location_has_one_name_under_dagster_dev_and_dg_dev() -> None:
    """``dagster dev -w workspace.yaml`` and ``dg dev`` name the sample code location alike, so
    the GraphQL example in docs/api.md (``repositoryLocationName``) works with either."""
    import tomllib

    import yaml

    root = Path(__file__).resolve().parents[2]
    workspace = yaml.safe_load((root / "workspace.yaml").read_text(encoding="utf-8"))
    (entry,) = workspace["load_from"]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    dg_name = project["tool"]["dg"]["project"]["code_location_name"]
    assert entry["python_module"]["location_name"] == dg_name == "maple"
    example = (root / "docs" / "api.md").read_text(encoding="utf-8")
    assert '"repositoryLocationName": "maple"' in example
