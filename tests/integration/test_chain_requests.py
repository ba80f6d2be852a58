"""What the sensor asks for while a provider queue's limit is being learned: the admitted shard
and the shards after it that wait only for its validation, as one chained ``submissions`` run
(a partition range with the chain's wait in its run config); while a chain holds the job's
waiting shards, no other submissions run; once it lets go, the sensor asks again."""

import time
from pathlib import Path

import dagster as dg
import polars as pl

from emulator.server import EmulatorServer
from maple_assets.api.runner import Runner
from maple_assets.factory import enrichment
from maple_assets.graph.admission import CHAIN_SHARDS, CHAIN_WAIT_S, chain_after
from maple_assets.graph.sensors import run_requests
from maple_assets.wiring import wire_resources
from maple_engine.providers.registry import build_provider
from resources.dagster_private import ASSET_PARTITION_RANGE_END_TAG as END
from resources.dagster_private import ASSET_PARTITION_RANGE_START_TAG as START


def test_a_chain_takes_the_waiting_shards_that_follow_without_a_gap() -> None:
    order = [f"s{i}" for i in range(6)]
    assert chain_after(["s0"], ["s1", "s2", "s3"], order) == ["s1", "s2", "s3"]
    assert chain_after(["s0"], ["s1", "s3"], order) == ["s1"]  # s2 is not waiting: a gap
    assert chain_after(["s0"], [], order) == []  # nothing waits for validation
    assert chain_after([], ["s1"], order) == []  # nothing admitted to chain after
    assert chain_after(["s9"], ["s1"], order) == []  # not a partition (yet)
    many = [f"s{i}" for i in range(40)]
    assert len(chain_after(["s0"], many[1:], many)) == CHAIN_SHARDS - 1


def test_the_sensor_asks_for_one_chained_run_and_none_while_it_holds(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    table = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"bread {i}" for i in range(8)]}).write_csv(table)
    en = enrichment(
        name="chained", source=str(table), prompt="Name {title}", model="gpt-4o-mini",
        provider="emulator", output=str(tmp_path / "out.parquet"), max_requests_per_batch=2,
    )  # fmt: skip
    provider = build_provider("emulator", emulator_server.url)
    resources = wire_resources(str(tmp_path / "store"), {"emulator": provider})
    keys = [en.key(a) for a in ("submissions", "raw_responses", "merged")]
    with dg.instance_for_test() as instance:
        runner = Runner(en, resources, instance, poll_interval_s=0.05, quiet=True)
        runner.materialize(en.key("input_shards"))
        order = instance.get_dynamic_partitions(en.partitions_def.name or "")
        assert len(order) == 4
        job = runner.job()
        asked = run_requests(job, *keys, order)
        assert len(asked) == 1, [(r.run_key, r.partition_key, r.tags) for r in asked]
        (chain,) = asked
        assert (chain.tags[START], chain.tags[END]) == (order[0], order[-1])
        assert chain.partition_key is None
        op = "__".join(keys[0].path)
        assert chain.run_config["ops"][op]["config"] == {"wait_for_validation_s": CHAIN_WAIT_S}

        job.state.hold_chain(time.time() + 60)  # a chained run is sending them
        assert run_requests(job, *keys, order) == []
        job.state.release_chain()
        assert [r.run_key for r in run_requests(job, *keys, order)] == [chain.run_key]

        runner.run()  # the driver runs the chain as the sensor asked: one submissions run
        assert runner.stage_runs["submissions"] == 1
        assert not job.state.chain_held(time.time())  # the run let go when it ended
        resources["maple_costs"].close()
    assert pl.read_parquet(tmp_path / "out.parquet")["llm_status"].to_list() == ["succeeded"] * 8
