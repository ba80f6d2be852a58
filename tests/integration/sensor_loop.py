"""What the daemon's sensor loop does, for tests that stand in for it: tick sensors and launch
each run they ask for, once."""

from collections.abc import Sequence
from typing import Any

import dagster as dg


def tick_and_launch(
    sensors: Sequence[dg.SensorDefinition],
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    launched: list[str],
) -> None:
    """One tick of each of ``sensors`` (of ``defs``), each run it asks for launched in this
    process unless its run key is in ``launched`` (the run keys so far; appended to)."""
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
            if request.run_key in launched:
                continue
            outcome = dg.materialize(
                assets, selection=request.asset_selection, partition_key=request.partition_key,
                instance=instance, resources=defs.resources, tags=request.tags,
                run_config=request.run_config,
            )  # fmt: skip
            assert outcome.success, request.run_key
            launched.append(str(request.run_key))
