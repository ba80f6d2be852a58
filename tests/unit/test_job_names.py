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
