""" "Materialize all" on a distilled job's group (``enrichment(distill=True)``): the backfill the
UI launches, run by the daemon's backfill loop on a real instance, beside the daemon's sensor
loop in its own process. The backfill's ``merged`` steps wait for each job's sensor, its
``distilled`` for the job's distill sensor to bring the unsure rows' round and the LLM job's
sensor to answer it; the backfill ends a success with the job's output written."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import (
    InProcessTestWorkspaceLoadTarget,
    create_test_daemon_workspace_context,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.distill_table import rule_label, write_items, write_schema
from tests.integration.test_materialize_all import SENSOR_LOOP, materialize_all

pytestmark = [
    pytest.mark.slow,  # two jobs, two rounds and a backfill: ~30-50 s on 2 cores
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:Function `AssetSelection.sources`:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
ROWS, SAMPLE = 2_000, 300

DEFS = textwrap.dedent(
    """
    import os

    import dagster as dg

    from maple_assets.factory import enrichment
    from maple_assets.wiring import maple_resources
    from tests.e2e.distill_table import PROMPT, SCHEMA, SYSTEM

    items = enrichment(
        "items", os.environ["TEST_ITEMS"], PROMPT, "gpt-4o-mini", provider="emulator",
        system=SYSTEM, response_schema=SCHEMA, distill=True, distill_sample=300,
        output=os.environ["TEST_OUT"], poll_interval_s=1,
    )
    defs = dg.Definitions(
        assets=items.assets, asset_checks=items.checks, sensors=items.sensors,
        resources=maple_resources([items]), executor=dg.in_process_executor,
    )
    """
)


def test_materialize_all_takes_a_distilled_job_to_its_output(
    tmp_path: Path, monkeypatch: Any
) -> None:
    items = write_items(tmp_path / "items.parquet", ROWS)
    write_schema(tmp_path / "schema.json")
    (tmp_path / "defs.py").write_text(DEFS, encoding="utf-8")
    (tmp_path / "home").mkdir()
    stop = tmp_path / "stop"
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, label_rule="keywords")) as server:
        for name, value in {
            "TEST_ITEMS": str(items), "TEST_OUT": str(tmp_path / "out.parquet"),
            "MAPLE_STORAGE": str(tmp_path / "store"), "MAPLE_EMULATOR_URL": server.url,
            "PYTHONPATH": str(Path(__file__).parents[2]),
        }.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("MAPLE_COST_DB", raising=False)
        origin = LoadableTargetOrigin(python_file=str(tmp_path / "defs.py"))
        target = InProcessTestWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin))
        with (
            dg.instance_for_test(
                temp_dir=str(tmp_path / "home"),
                synchronous_run_launcher=True,
                synchronous_run_coordinator=True,
            ) as instance,
            create_test_daemon_workspace_context(target, instance) as context,
        ):
            sensors = subprocess.Popen(
                [sys.executable, "-m", SENSOR_LOOP, str(tmp_path / "defs.py"), "items", str(stop)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                backfill = materialize_all(instance, context, None)  # type: ignore[arg-type]
            finally:
                stop.touch()
                out, err = sensors.communicate(timeout=120)
            stats = server.stats()
    assert sensors.returncode == 0, err[-3000:]
    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, backfill.error
    launched = json.loads(out.splitlines()[-1])
    # the unsure rows' round, asked for by the distill sensor (after the LLM job's merge of
    # the sample, or after a later merge of the embeddings: the round is what the answers call for)
    assert any(key.startswith(("items:unsure:", "items:sample:")) for key in launched)
    table = pl.read_parquet(tmp_path / "out.parquet")
    assert table.height == ROWS and stats["chat_requests_billed"] <= 0.25 * ROWS
    labels = table["llm_parsed"].struct.field("aisle").to_list()
    agree = sum(a == rule_label(t) for a, t in zip(labels, table["title"], strict=True))
    assert agree / ROWS >= 0.95
    assert (table["llm_source"] == "distilled").sum() == ROWS - stats["chat_requests_billed"]
