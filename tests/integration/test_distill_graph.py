"""A distilled job through the asset graph (``enrichment(distill=True)`` and the Component's
``distill: true``): ``Runner`` on a Dagster instance runs the embedding job's graph,
``distill_rows``, the LLM job's graph (the sample, then the unsure rows) and ``distilled``, on
the emulator over HTTP, its labels following a rule (``--label-rule keywords``)."""

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.cli.commands import main
from maple_assets.components import JobComponent
from maple_assets.factory import Enrichment, enrichment
from maple_assets.graph.names import dagster_name
from maple_assets.wiring import maple_resources
from maple_engine.errors import ConfigError
from tests.e2e.distill_table import PROMPT, SCHEMA, SYSTEM, rule_label, write_items, write_schema
from tests.integration.sensor_loop import tick_and_launch

ROWS, SAMPLE = 3_000, 400


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, label_rule="keywords")) as running:
        monkeypatch.setenv("MAPLE_EMULATOR_URL", running.url)
        monkeypatch.delenv("MAPLE_COST_DB", raising=False)
        yield running


def run(en: Enrichment, root: Path) -> dict[str, dict[str, Any]]:
    """Run ``en`` to its end on a test instance; each asset's materializations' metadata."""
    resources = maple_resources([en], storage_root=str(root))
    try:
        with dg.instance_for_test() as instance:
            Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
            return {
                key.to_user_string(): _materializations(instance, key)
                for key in (en.key("distill_rows"), en.key("distilled"))
            }
    finally:
        resources["maple_costs"].close()


def _materializations(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any]:
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=10)
    found = [r.asset_materialization for r in reversed(records.records)]
    return {"all": [{k: v.value for k, v in m.metadata.items()} for m in found if m]}


def check_distilled(out: Path, stats: dict[str, int], metadata: dict[str, Any]) -> None:
    table = pl.read_parquet(out)
    assert table.height == ROWS
    assert stats["embedding_inputs_billed"] == ROWS
    assert stats["chat_requests_billed"] <= 0.25 * ROWS
    distilled = table.filter(pl.col("llm_source") == "distilled")
    assert distilled.height == ROWS - stats["chat_requests_billed"]
    labels = table["llm_parsed"].struct.field("aisle").to_list()
    agree = sum(a == rule_label(t) for a, t in zip(labels, table["title"], strict=True))
    assert agree / ROWS >= 0.95
    rounds = metadata["items/distill_rows"]["all"]
    assert [r["stage"] for r in rounds] == ["sample", "unsure"]
    assert rounds[0]["llm_rows"] == SAMPLE and rounds[1]["distilled"] == distilled.height
    (done,) = metadata["items/distilled"]["all"]
    assert done["distilled"] == distilled.height and done["refused"] == ""
    assert done["path"] == str(out) and done["held_out"] > 0


def declared(folder: Path, **extra: Any) -> Enrichment:
    """The distilled job over a table of ``ROWS`` items written in ``folder``."""
    items = write_items(folder / "items.parquet", ROWS)
    return enrichment(
        "items", str(items), PROMPT, "gpt-4o-mini", provider="emulator", system=SYSTEM,
        response_schema=SCHEMA, distill=True, distill_sample=SAMPLE,
        output=str(folder / "out.parquet"), **extra,
    )  # fmt: skip


@pytest.mark.slow  # about 30 s on 2 cores
def test_an_enrichment_declared_distilled_runs_through_the_asset_graph(
    server: EmulatorServer, tmp_path: Path
) -> None:
    en = declared(tmp_path)
    metadata = run(en, tmp_path / "store")
    check_distilled(tmp_path / "out.parquet", server.stats(), metadata)
    # one job in maple costs and maple status, both of its jobs' costs shown
    store = ["--storage", str(tmp_path / "store")]
    costs = CliRunner().invoke(main, ["costs", "--by", "job", *store], catch_exceptions=False)
    table = [line.split() for line in costs.output.splitlines() if line.strip()]
    whole, llm, embedded = (
        next(r for r in table if r[0] == k) for k in ("items", "llm", "embeddings")
    )
    assert whole[1] == "(distilled)" and not any(r[0] == "items-embeddings" for r in table)
    assert float(whole[-3]) == pytest.approx(float(llm[-3]) + float(embedded[-3]), abs=2e-6)
    assert float(embedded[-3]) > 0 and float(llm[-3]) > 0
    status = CliRunner().invoke(main, ["status", *store], catch_exceptions=False).output
    lines = [line for line in status.splitlines() if line.startswith("items")]
    assert len(lines) == 1 and "distilled (LLM $" in lines[0] and ", embeddings $" in lines[0]


@pytest.mark.slow  # about 30 s on 2 cores
def test_a_component_declared_distilled_runs_through_the_asset_graph(
    server: EmulatorServer, tmp_path: Path
) -> None:
    write_items(tmp_path / "items.parquet", ROWS)
    write_schema(tmp_path / "schema.json")
    (tmp_path / "defs.yaml").write_text(
        "type: maple_assets.EnrichmentComponent\nattributes:\n"
        f'  name: items\n  source: items.parquet\n  prompt: "{PROMPT}"\n'
        f'  system: "{SYSTEM}"\n  model: gpt-4o-mini\n  provider: emulator\n'
        f"  response_schema: schema.json\n  output: out.parquet\n"
        f"  distill: true\n  distill_sample: {SAMPLE}\n",
        encoding="utf-8",
    )
    with contextlib.chdir(tmp_path):
        loaded = dg.Component.from_yaml_path(tmp_path / "defs.yaml")
    (component,) = getattr(loaded, "components", [loaded])
    assert isinstance(component, JobComponent)
    en = component.declare()
    assert en.distill is not None
    metadata = run(en, tmp_path / "store")
    check_distilled(tmp_path / "out.parquet", server.stats(), metadata)


def daemon(en: Enrichment, resources: dict[str, Any], instance: dg.DagsterInstance) -> list[str]:
    """What the daemon does with the job's sensors running, until ``distilled`` is there: tick
    each sensor, launch each run it asks for once; the run keys launched."""
    defs = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, sensors=en.sensors, resources=resources
    )
    launched: list[str] = []
    for _ in range(400):
        if instance.get_latest_materialization_event(en.key("distilled")) is not None:
            return launched
        tick_and_launch(en.sensors, defs, instance, launched)
        time.sleep(0.1)
    raise AssertionError(f"distilled was not reached; launched {launched}")


@pytest.mark.slow  # about 60 s on 2 cores
def test_the_daemons_sensors_take_a_job_from_its_embeddings_to_distilled(
    server: EmulatorServer, tmp_path: Path
) -> None:
    en = declared(tmp_path, poll_interval_s=1)
    assert en.distill is not None
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    try:
        with dg.instance_for_test() as instance:
            # the UI: materialize the embedding job's input_shards; the sensors do the rest
            shards = en.distill.embed.key("input_shards")
            assert dg.materialize(
                [*en.assets, *en.checks], selection=[shards], instance=instance,
                resources=resources,
            ).success  # fmt: skip
            launched = daemon(en, resources, instance)
            metadata = {
                key.to_user_string(): _materializations(instance, key)
                for key in (en.key("distill_rows"), en.key("distilled"))
            }
    finally:
        resources["maple_costs"].close()
    assert sum(":sample:" in k or ":unsure:" in k or ":distilled:" in k for k in launched) == 3
    check_distilled(tmp_path / "out.parquet", server.stats(), metadata)


def test_the_graph_of_a_distilled_job_and_its_resources(tmp_path: Path) -> None:
    en = declared(tmp_path, distill_provider="openai")  # embeddings through another provider
    defs = dg.Definitions(
        assets=en.assets, asset_checks=en.checks, sensors=en.sensors,
        resources=maple_resources([en], storage_root=str(tmp_path / "store")),
    )  # fmt: skip
    graph = defs.resolve_asset_graph()  # every resource a step needs is there (both providers)
    parents = {
        key.to_user_string(): sorted(p.to_user_string() for p in graph.get(key).parent_keys)
        for key in graph.get_all_asset_keys()
        if graph.get(key).is_materializable
    }
    embed = dagster_name("items-embeddings")
    assert parents["items/distill_rows"] == [f"{embed}/merged"]
    assert parents["items/input_shards"] == ["items/distill_rows"]
    assert parents["items/merged"] == ["items/input_shards", "items/raw_responses"]
    assert parents["items/distilled"] == ["items/distill_rows", "items/merged"]
    assert parents[f"{embed}/merged"] == [f"{embed}/input_shards", f"{embed}/raw_responses"]
    names = sorted(s.name for s in defs.sensors or [])
    assert names == sorted(["items_sensor", f"{embed}_sensor", f"{embed}_watch",
                            "items_distill_sensor"])  # fmt: skip
    with pytest.raises(ConfigError, match="reads its input from a file"):
        enrichment(
            "items", dg.AssetKey(["raw", "items"]), PROMPT, "gpt-4o-mini", provider="emulator",
            response_schema=SCHEMA, distill=True,
        )  # fmt: skip
