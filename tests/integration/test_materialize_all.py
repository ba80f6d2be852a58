""" "Materialize all" on an enrichment's group after its input changed: the backfill the UI
launches (all partitions of the four assets, stored with the partitions of that moment) and the
daemon runs, on a real instance. The new version cuts new shard keys as the backfill's own
``input_shards`` run goes; the earlier version's partitions stay while the backfill targets them
(their runs send nothing), the backfill ends a success, the sensor then takes the new version's
shards to ``merged`` and drops the superseded partitions."""

import json
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import (
    InProcessTestWorkspaceLoadTarget,
    create_test_daemon_workspace_context,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._daemon.backfill import execute_backfill_iteration

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import Enrichment, enrichment
from maple_assets.wiring import maple_resources

pytestmark = [
    pytest.mark.slow,  # two jobs and a backfill of four runs: ~20 s
    pytest.mark.timeout(180),
    # Dagster's own backfill loop calls its deprecated AssetSelection.sources (dagster 1.13)
    pytest.mark.filterwarnings("ignore:Function `AssetSelection.sources`:DeprecationWarning"),
    # and leaves its asyncio loops' shutdown_asyncgens unawaited
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

DEFS = textwrap.dedent(
    """
    import os

    import dagster as dg

    from maple_assets.factory import enrichment
    from maple_assets.wiring import maple_resources

    tags = enrichment(
        name="tags", source=os.environ["TEST_ITEMS"], prompt="Name {title}",
        model="gpt-4o-mini", provider="emulator", max_requests_per_batch=3,
        max_enqueued_tokens=10_000_000, poll_interval_s=1,
    )
    defs = dg.Definitions(
        assets=tags.assets, asset_checks=tags.checks, sensors=tags.sensors,
        resources=maple_resources([tags]),
        executor=dg.in_process_executor,  # docs/components.md: steps in the run's process
    )
    """
)


def declared(items: Path) -> Enrichment:
    """The job of the code location's file, as the test's own driver runs it."""
    return enrichment(
        name="tags", source=str(items), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", max_requests_per_batch=3, max_enqueued_tokens=10_000_000,
        poll_interval_s=1,
    )  # fmt: skip


def materialize_all(
    instance: dg.DagsterInstance, context: Any, en: Enrichment
) -> PartitionBackfill:
    """What the UI's "Materialize all" with All partitions stores, run by the daemon's loop."""
    graph = context.create_request_context().asset_graph
    materializable = [key for key in graph.get_all_asset_keys() if graph.get(key).is_materializable]
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id="materialize-all",
        asset_graph=graph,
        partition_names=None,
        asset_selection=materializable,
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=True,
        title=None,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    for _ in range(30):
        list(execute_backfill_iteration(context, logging.getLogger("backfill")))
        stored = instance.get_backfill(backfill.backfill_id)
        assert stored is not None
        if stored.status != BulkActionStatus.REQUESTED:
            return stored
    raise AssertionError("the backfill did not end")


def tick(en: Enrichment, resources: dict[str, Any], instance: dg.DagsterInstance) -> Any:
    """One tick of the enrichment's sensor, as the daemon evaluates it."""
    defs = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, sensors=en.sensors, resources=resources
    )
    with (
        dg.partition_loading_context(dynamic_partitions_store=instance),
        dg.build_sensor_context(instance=instance, resources=resources, definitions=defs) as ctx,
    ):
        return en.sensor.evaluate_tick(ctx)


# The daemon's sensor loop beside the backfill (the enrichment's sensor, ticked), in its own
# process as the daemon's is (Dagster configures logging per run: two in-process runs in threads
# of one process deadlock on it).
#: the daemon's sensor loop, as a program (`tests.integration.sensor_loop`); here it launches
#: no merge: the daemon's sensor asks for none once merged is there (merged_for), and this
#: loop, which cannot pass as the daemon, leaves merged to the backfill
SENSOR_LOOP = "tests.integration.sensor_loop"


def test_materialize_all_after_an_edit_succeeds_and_reaches_merged(
    emulator_server: EmulatorServer, tmp_path: Path, monkeypatch: Any
) -> None:
    items = tmp_path / "items.parquet"
    pl.DataFrame({"title": [f"loaf {i}" for i in range(7)]}).write_parquet(items)
    (tmp_path / "defs.py").write_text(DEFS, encoding="utf-8")
    for name, value in {
        "TEST_ITEMS": str(items),
        "MAPLE_STORAGE": str(tmp_path / "store"),
        "MAPLE_EMULATOR_URL": emulator_server.url,
        "PYTHONPATH": str(Path(__file__).parents[2]),  # the sensor loop's program
    }.items():
        monkeypatch.setenv(name, value)
    en = declared(items)
    resources = maple_resources([en])
    origin = LoadableTargetOrigin(python_file=str(tmp_path / "defs.py"))
    target = InProcessTestWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin))
    (tmp_path / "home").mkdir()
    pdef = en.partitions_def.name or ""
    stop = tmp_path / "stop"
    with (
        dg.instance_for_test(
            temp_dir=str(tmp_path / "home"),
            synchronous_run_launcher=True,
            synchronous_run_coordinator=True,
        ) as instance,
        create_test_daemon_workspace_context(target, instance) as context,
    ):
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        first = instance.get_dynamic_partitions(pdef)
        sent = emulator_server.stats()["requests_received"]
        pl.DataFrame({"title": [f"rye {i}" for i in range(7)]}).write_parquet(items)  # version 2

        sensor = subprocess.Popen(
            [sys.executable, "-m", SENSOR_LOOP, str(tmp_path / "defs.py"), "tags", str(stop),
             ":merged:"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            backfill = materialize_all(instance, context, en)
        finally:
            stop.touch()
            out, err = sensor.communicate(timeout=60)
        assert sensor.returncode == 0, err[-3000:]
        by_sensor = json.loads(out.splitlines()[-1])
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
        superseded = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=en.key("submissions"), asset_partitions=first),
            limit=10,
        ).records
        merged = instance.fetch_materializations(en.merged_key, limit=1).records
        tick(en, resources, instance)  # the backfill ended: its superseded partitions go
        after = instance.get_dynamic_partitions(pdef)
        resources["maple_costs"].close()

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, backfill.error
    assert runs and {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert first == ["s00000", "s00001", "s00002"]
    new = ["v2-s00000", "v2-s00001", "v2-s00002"]
    assert after == new  # gone once no backfill needs them
    # kept while the backfill targeted them: its run of version 1's shards, which sent nothing
    metadata = superseded[0].asset_materialization.metadata  # type: ignore[union-attr]
    assert metadata["superseded_by_version"].value == 2 and metadata["requests"].value == 0
    assert emulator_server.stats()["requests_received"] - sent == 7  # version 2's rows, once
    assert len(by_sensor) == 4  # three shards sent in three runs, collected in one
    assert merged[0].run_id in {run.run_id for run in runs}  # the backfill's merged run
    assert merged[0].asset_materialization.metadata["rows"].value == 7  # type: ignore[union-attr]
    out = pl.read_parquet(tmp_path / "store" / "tags" / "output" / "merged.parquet")
    assert out["llm_response"].to_list() == [f"echo: Name rye {i}" for i in range(7)]
