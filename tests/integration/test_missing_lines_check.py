"""The shard's side of every line accounted for in Dagster: ``raw_responses``' metadata says
``sent N, answered A, failed F, missing M``, and its ``no_missing_lines`` check passes while a
missing line is resent and fails once one stays missing after its last send."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider
from tests.integration.test_failed_rows_check import evaluations

ROWS = 20


def _run(tmp_path: Path, retries: dict[str, int]) -> tuple[dict[str, Any], list[Any]]:
    """The job run to its end on an emulator that loses a third of the answered lines: the
    newest ``raw_responses`` metadata of shard s00000 and its check evaluations, newest first."""
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(ROWS)]}).write_csv(table)
    en = enrichment(
        name="lines", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), retries=retries,
    )  # fmt: skip
    config = EmulatorConfig(batch_seconds=0, drop_lines=0.3, seed=3, control_fail=0.0)
    with EmulatorServer(config) as server, dg.instance_for_test() as instance:
        provider = build_provider("emulator", server.url)
        resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        resources["maple_costs"].close()
        key = en.key("raw_responses")
        (record, *_) = instance.fetch_materializations(key, limit=1).records
        checked = evaluations(instance, dg.AssetCheckKey(key, "no_missing_lines"))
    assert record.asset_materialization is not None
    metadata = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    return metadata, checked


def test_missing_lines_resent_leave_the_shard_whole_and_the_check_passing(tmp_path: Path) -> None:
    metadata, checked = _run(tmp_path, {})
    assert metadata["lines"] == f"sent {ROWS}, answered {ROWS}, failed 0, missing 0"
    lost = metadata["lines_missing"]
    assert lost > 0 and metadata["lines_duplicated"] == metadata["lines_unknown"] == 0
    assert len(checked) >= 2 and all(e.passed for e in checked)  # one per collection
    assert checked[-1].description.endswith("missing now, sent again)")
    assert checked[0].description == (
        f"sent {ROWS}, answered {ROWS}, failed 0, missing 0; {lost} line(s) missing from ended "
        "batches, resent"
    )


def test_a_line_still_missing_after_its_last_send_fails_the_check(tmp_path: Path) -> None:
    metadata, (latest, *_) = _run(tmp_path, {"missing": 0})
    missing = metadata["missing"]
    assert missing == metadata["lines_missing"] > 0
    assert (
        metadata["lines"] == f"sent {ROWS}, answered {ROWS - missing}, failed 0, missing {missing}"
    )
    assert latest.passed is False and latest.severity == dg.AssetCheckSeverity.ERROR
    assert latest.metadata["missing_for_good"].value == missing
    assert latest.description.endswith(f"({missing} still missing after their last send)")
