"""What the daemon's sensor loop does, for tests that stand in for it: tick sensors and launch
each run they ask for, once. Run as a program (``python -m tests.integration.sensor_loop DEFS
NAME STOP [SKIP]``), it ticks the sensors of the job ``NAME`` of the file ``DEFS`` on the
instance of ``DAGSTER_HOME`` until the file ``STOP`` exists, then prints the run keys it
launched as JSON; runs whose key holds ``SKIP`` are not launched."""

import json
import runpy
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg


def tick_and_launch(
    sensors: Sequence[dg.SensorDefinition],
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    launched: list[str],
    skip: str | None = None,
) -> None:
    """One tick of each of ``sensors`` (of ``defs``), each run it asks for launched in this
    process unless its run key is in ``launched`` (the run keys so far; appended to) or holds
    ``skip``."""
    assets: list[Any] = [*(defs.assets or []), *(defs.asset_checks or [])]
    for sensor in sensors:
        with (
            dg.partition_loading_context(dynamic_partitions_store=instance),
            dg.build_sensor_context(
                instance=instance, resources=defs.resources, definitions=defs
            ) as context,
        ):
            result = sensor.evaluate_tick(context)
        for request in result.run_requests or []:
            if request.run_key in launched or (skip is not None and skip in str(request.run_key)):
                continue
            outcome = dg.materialize(
                assets, selection=request.asset_selection, partition_key=request.partition_key,
                instance=instance, resources=defs.resources, tags=request.tags,
                run_config=request.run_config,
            )  # fmt: skip
            assert outcome.success, request.run_key
            launched.append(str(request.run_key))


def main(defs_file: str, name: str, stop: str, skip: str | None = None) -> None:
    code = runpy.run_path(defs_file)
    job, defs = code[name], code["defs"]
    instance = dg.DagsterInstance.get()
    launched: list[str] = []
    while not Path(stop).exists():
        tick_and_launch(job.sensors, defs, instance, launched, skip)
        time.sleep(0.2)
    print(json.dumps(launched))


if __name__ == "__main__":
    main(*sys.argv[1:])
