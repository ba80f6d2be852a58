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
    else:
        assert metadata["failed"] == 0
