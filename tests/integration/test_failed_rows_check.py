"""Checks fail on failed rows: with half the rows refused, ``merged``'s ``failed_rows`` check
fails (WARN under the default threshold, ERROR past ``error_failed_share``) and names the
failure class; with none refused it passes."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


def run_job(tmp_path: Path, refused: float, **options: float) -> dg.AssetCheckEvaluation:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(40)]}).write_csv(table)
    en = enrichment(
        name="checked", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), retries={"refused": 0},
        **options,
    )  # fmt: skip
    config = EmulatorConfig(batch_seconds=0, fail={"refused": refused}, seed=7, control_fail=0.0)
    with EmulatorServer(config) as server, dg.instance_for_test() as instance:
        provider = build_provider("emulator", server.url)
        resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        resources["maple_costs"].close()
        key = dg.AssetCheckKey(en.merged_key, "failed_rows")
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
        assert record.event is not None and record.event.dagster_event is not None
        return record.event.dagster_event.asset_check_evaluation_data  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("refused", "options", "passed", "severity"),
    [
        (0.0, {}, True, dg.AssetCheckSeverity.WARN),
        (0.5, {}, False, dg.AssetCheckSeverity.ERROR),
        (0.5, {"error_failed_share": 0.9}, False, dg.AssetCheckSeverity.WARN),
        (0.5, {"max_failed_share": 0.9}, True, dg.AssetCheckSeverity.WARN),
    ],
)
def test_failed_rows_check(
    tmp_path: Path,
    refused: float,
    options: dict[str, float],
    passed: bool,
    severity: dg.AssetCheckSeverity,
) -> None:
    evaluation = run_job(tmp_path, refused, **options)
    metadata = {k: v.value for k, v in evaluation.metadata.items()}
    assert evaluation.passed is passed, metadata
    assert evaluation.severity == severity
    assert metadata["rows"] == 40
    if refused:
        assert 0 < metadata["failed"] < 40
        assert str(metadata["top_failure_classes"]).startswith("refused: ")
        said = f"{metadata['failed']} of 40 rows failed"
        assert evaluation.description.startswith(said) and "refused: " in evaluation.description
    else:
        assert metadata["failed"] == 0
        assert evaluation.description == "no row of 40 failed"


def test_merged_has_exactly_the_input_tables_rows(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    """Passes after a run; fails, naming the first different row, once the input file no
    longer matches what merged holds (a row edited, a row appended)."""
    table = tmp_path / "items.csv"
    titles = [f"item {i}" for i in range(9)]
    pl.DataFrame({"title": titles, "sku": [f"S{i}" for i in range(9)]}).write_csv(table)
    en = enrichment(
        name="rows", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"),
    )  # fmt: skip
    resources = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", emulator_server.url)}
    )
    key = dg.AssetCheckKey(en.merged_key, "same_rows_as_input")

    def check() -> dict[str, object]:
        result = dg.materialize(
            [*en.assets, *en.checks], selection=dg.AssetSelection.checks(key),
            instance=instance, resources=resources,
        )  # fmt: skip
        (evaluation,) = result.get_asset_check_evaluations()
        return {"passed": evaluation.passed} | {k: v.value for k, v in evaluation.metadata.items()}

    with dg.instance_for_test() as instance:
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        assert check() == {"passed": True, "input_rows": 9, "rows": 9}
        edited = [*titles[:4], "item four", *titles[5:]]
        pl.DataFrame({"title": edited, "sku": [f"S{i}" for i in range(9)]}).write_csv(table)
        assert check() == {"passed": False, "input_rows": 9, "rows": 9, "first_different_row": 4}
        pl.DataFrame({"title": [*titles, "x"], "sku": [f"S{i}" for i in range(10)]}).write_csv(
            table
        )
        assert check() == {"passed": False, "input_rows": 10, "rows": 9, "first_different_row": 9}
        resources["maple_costs"].close()
