"""``key_prefix`` on a component: every asset key of the job (the observed input file, the four
stages), every check and the sensor's targets sit under the prefix, and a job run through the
driver materializes and checks them there. Without a prefix the keys are ``[name, asset]``."""

from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider
from tests.integration.test_components import load, write_yaml

STAGES = ["input_file", "input_shards", "submissions", "raw_responses", "merged"]


@pytest.mark.slow  # a job of three shards through the driver: ~12 s
def test_a_prefixed_component_runs_under_its_prefix(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    pl.DataFrame({"title": [f"bread {i}" for i in range(5)]}).write_csv(tmp_path / "items.csv")
    path = write_yaml(
        tmp_path,
        "  name: tags\n  source: items.csv\n  prompt: 'Name {title}'\n  model: gpt-4o-mini\n"
        "  provider: emulator\n  max_requests_per_batch: 2\n  key_prefix: [catalog, llm]\n",
    )
    en = load(path).declare()
    prefixed = {dg.AssetKey(["catalog", "llm", "tags", stage]) for stage in STAGES}
    assert {a.key for a in en.assets} == prefixed
    checked = {c.asset_key for d in [*en.checks, *en.assets[1:]] for c in d.check_keys}
    assert checked == {en.key(s) for s in ("input_shards", "raw_responses", "merged")}
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    defs = dg.Definitions(assets=en.assets, sensors=en.sensors, resources=resources)
    targets = en.sensor.asset_selection
    assert targets is not None
    assert targets.resolve(defs.resolve_asset_graph()) == {
        en.key(s) for s in ("submissions", "raw_responses", "merged")
    }
    with dg.instance_for_test() as instance:
        Runner(en, resources, instance, poll_interval_s=0.05, quiet=True).run()
        resources["maple_costs"].close()
        done = {
            key
            for key in prefixed - {en.key("input_file")}
            if instance.get_latest_materialization_event(key) is not None
        }
        assert done == prefixed - {en.key("input_file")}
        shard_checks = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(en.key("raw_responses"), "failed_rows"), limit=10
        )
        assert len(shard_checks) == 3  # five rows, two a shard
        assert not {k for k in instance.get_asset_keys() if k.path[0] == "tags"}


def test_without_a_prefix_the_keys_are_the_name_and_the_asset(tmp_path: Path) -> None:
    pl.DataFrame({"t": ["a"]}).write_csv(tmp_path / "items.csv")
    en = enrichment(name="tags", source=str(tmp_path / "items.csv"), prompt="{t}", model="m")
    assert [a.key.path for a in en.assets] == [["tags", stage] for stage in STAGES]
    checked = {tuple(c.asset_key.path) for d in [*en.checks, *en.assets[1:]] for c in d.check_keys}
    assert checked == {("tags", s) for s in ("input_shards", "raw_responses", "merged")}
