"""Job names as users type them (letters, digits, ``_``, ``-``, ``.``): accepted, kept on disk,
and mapped to valid Dagster names for the definitions."""

import re
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from maple_assets.factory import enrichment
from maple_assets.graph.names import dagster_name
from maple_assets.wiring import wire_resources
from maple_engine.errors import ConfigError
from maple_engine.providers.registry import build_provider
from maple_engine.spec import validate_name


def test_dagster_names_keep_valid_names_and_map_the_others() -> None:
    assert dagster_name("product_attributes") == "product_attributes"
    mapped = {dagster_name(n) for n in ("rye-bread-2026", "rye.bread.2026", "rye_bread_2026")}
    assert len(mapped) == 3
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", name) for name in mapped)
    assert dagster_name("rye-bread-2026") == dagster_name("rye-bread-2026")


@pytest.mark.parametrize("name", ["rye-bread-2026", "v1.2", "2026_rye"])
def test_names_users_type_are_valid(name: str) -> None:
    validate_name(name)


@pytest.mark.parametrize("name", ["rye bread", "a/b", "../up", ".hidden", ""])
def test_names_that_are_no_folder_name_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="is not usable as a folder name"):
        validate_name(name)


def test_definitions_of_a_dashed_job_name_load(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("title\nrye\n")
    en = enrichment(
        name="rye-bread-2026",
        source=str(source),
        prompt="{title}",
        model="gpt-4o-mini",
        provider="emulator",
    )
    resources: dict[str, Any] = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", "http://127.0.0.1:1")}
    )
    defs = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, sensors=en.sensors, resources=resources
    )
    dg.Definitions.validate_loadable(defs)
    assert en.spec.name == "rye-bread-2026"
    assert en.key("merged").path[0] == dagster_name("rye-bread-2026")
    assert en.sensor.name == f"{dagster_name('rye-bread-2026')}_sensor"


def test_a_command_names_an_unnamed_job_after_its_input_and_what_it_sends() -> None:
    from maple_assets.api.driver import job_spec

    spec = job_spec("/data/rye-bread.csv", prompt="{title}", model="gpt-4o-mini")
    assert spec.name == f"rye_bread_{spec.fingerprint()[:8]}"
    again = job_spec("/data/rye-bread.csv", prompt="{title}", model="gpt-4o-mini", job=None)
    assert again == spec  # the same job, the same name
    other = job_spec("/data/rye-bread.csv", prompt="{title}!", model="gpt-4o-mini")
    assert other.name != spec.name
    for key in ("job", "name"):
        named = job_spec("/data/rye-bread.csv", prompt="{t}", model="m", **{key: "rye-2026"})
        assert named.name == "rye-2026"
    with pytest.raises(ConfigError, match="is not usable as a folder name"):
        job_spec("/data/rye-bread.csv", prompt="{t}", model="m", job="rye bread")


def test_a_command_writes_its_output_beside_the_input_by_its_kind() -> None:
    from maple_assets.api.driver import job_spec

    chat = job_spec("s3://b/rye.csv?v=2", prompt="{t}", model="m")
    assert chat.output == "s3://b/rye_enriched.csv?v=2"
    embed = job_spec("s3://b/rye.csv?v=2", kind="embedding", text="{t}", model="m")
    assert embed.output == "s3://b/rye_embedded.parquet"
    given = job_spec("/d/rye.csv", prompt="{t}", model="m", output="/d/out.parquet")
    assert given.output == "/d/out.parquet"
