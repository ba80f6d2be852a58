"""Checks fail on failed rows: with half the rows refused, ``merged``'s ``failed_rows`` check
fails (WARN under the default threshold, ERROR past ``error_failed_share``) and names the
failure class; with none refused it passes."""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider


@contextlib.contextmanager
def ran_job(
    tmp_path: Path, refused: float, **options: float
) -> Iterator[tuple[dg.DagsterInstance, Enrichment]]:
    """The 40-row job run to its end on the emulator with ``refused`` of the rows refused."""
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
        yield instance, en


def evaluations(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> list[Any]:
    """Every stored evaluation of the check ``key``, newest first."""
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
    return [
        r.event.dagster_event.asset_check_evaluation_data
        for r in records
        if r.event is not None and r.event.dagster_event is not None
    ]


def run_job(tmp_path: Path, refused: float, **options: float) -> dg.AssetCheckEvaluation:
    with ran_job(tmp_path, refused, **options) as (instance, en):
        (latest, *_) = evaluations(instance, dg.AssetCheckKey(en.merged_key, "failed_rows"))
        return latest  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("refused", "options", "passed", "severity"),
    [
        (0.0, {}, True, dg.AssetCheckSeverity.WARN),
        (0.5, {}, False, dg.AssetCheckSeverity.ERROR),
        # ~9 s each: the two thresholds' own cases in the long pass
        pytest.param(
            0.5,
            {"error_failed_share": 0.9},
            False,
            dg.AssetCheckSeverity.WARN,
            marks=pytest.mark.slow,
        ),
        pytest.param(
            0.5,
            {"max_failed_share": 0.9},
            True,
            dg.AssetCheckSeverity.WARN,
            marks=pytest.mark.slow,
        ),
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


def test_each_shard_partition_carries_its_failed_share_and_severity(tmp_path: Path) -> None:
    """A shard with refused rows is not plain success: its raw_responses partition's
    ``failed_rows`` evaluation fails with Dagster's severity and names the class and count,
    and its materialization carries its failed share; a shard with none passes."""
    with ran_job(tmp_path, 0.5, max_requests_per_batch=10) as (instance, en):
        key = en.key("raw_responses")
        checked = {
            e.partition: e for e in evaluations(instance, dg.AssetCheckKey(key, "failed_rows"))
        }
        records = instance.fetch_materializations(key, limit=20).records
    latest = {r.partition_key: r.storage_id for r in reversed(records)}  # newest wins
    figures = {
        r.partition_key: {k: v.value for k, v in r.asset_materialization.metadata.items()}
        for r in records
        if r.asset_materialization is not None
    }
    assert sorted(checked) == ["s00000", "s00001", "s00002", "s00003"]
    for shard, evaluation in checked.items():
        failed, share = figures[shard]["failed"], figures[shard]["failed_share"]
        assert share == round(failed / 10, 6) and 0 < failed < 10, (shard, figures[shard])
        assert evaluation.passed is False
        assert evaluation.severity == dg.AssetCheckSeverity.ERROR  # past error_failed_share
        assert evaluation.description.startswith(f"{failed} of 10 rows failed")
        assert f"refused: {failed}" in evaluation.description
        # it judged the partition's latest materialization: the UI shows it on that partition
        assert evaluation.target_materialization_data.storage_id == latest[shard]
