"""A distilled job's asset graph (``enrichment(distill=True)``) run to its end in-process, as
``Runner.run`` runs any job's: the embedding job's graph, then ``distill_rows`` and the LLM
job's graph until ``distill_rows`` has given the unsure rows (twice on a first run: the sample,
then the sample and the unsure rows), then ``distilled``. Each step is a Dagster
materialization, so a kill at any point and a rerun pay for nothing twice: each job resumes,
and ``distill_rows`` gives the LLM job what the stored answers call for."""

from typing import TYPE_CHECKING, Any

import dagster as dg

from maple_assets.graph.distill_sensor import ROWS
from maple_engine.crashpoints import crash_point
from maple_engine.merge.merge import OutputTable

if TYPE_CHECKING:
    from maple_assets.api.runner import Runner

#: ``distill_rows`` materializations a run needs at most: the sample's, then the unsure rows'
ROUNDS = 2


def run_distilled_graph(runner: "Runner") -> OutputTable:
    """Run the distilled job of ``runner``'s enrichment; its output."""
    graph = runner.enrichment.distill
    assert graph is not None, "a distilled job"
    runner.of(graph.embed).run()
    crash_point("distill_embedded")
    rows = graph.llm.key(ROWS)
    for _ in range(ROUNDS):
        runner.materialize(rows)
        unsure = _metadata(runner.instance, rows).get("stage") == "unsure"
        if unsure:
            crash_point("distill_unsure")
        runner.of(graph.llm).run()
        if unsure:
            break
    runner.materialize(graph.distilled)
    written = _metadata(runner.instance, graph.distilled)
    fmt = runner.enrichment.spec.output_format()
    return OutputTable(path=str(written["path"]), format=fmt, rows=int(written["rows"]))


def _metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any]:
    """The values of the latest materialization's metadata of ``key``."""
    event = instance.get_latest_materialization_event(key)
    assert event is not None and event.asset_materialization is not None, key
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}
