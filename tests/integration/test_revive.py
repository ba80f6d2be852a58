"""A shard whose submit run died for good (worker killed, no run retry to come) is asked for
again under a new run key, instead of waiting forever behind its spent key; a key whose run
succeeded, or that Dagster will retry, is left alone. Real sensor ticks, a real Dagster instance."""

from pathlib import Path
from typing import Any

import dagster as dg

from emulator.server import EmulatorServer
from maple_assets.graph.revive import revive
from resources.dagster_private import AUTO_RETRY_RUN_ID_TAG, RUN_KEY_TAG, WILL_RETRY_TAG
from tests.integration.test_sensor_cursor import small_job, tick


@dg.op
def dies() -> None:
    raise RuntimeError("the run worker was killed")


@dg.op
def works() -> None:
    pass


def run_with_key(instance: dg.DagsterInstance, key: str, op: Any = dies) -> str:
    job = dg.GraphDefinition(name=f"stand_in_{op.name}", node_defs=[op]).to_job()
    result = job.execute_in_process(
        instance=instance, tags={RUN_KEY_TAG: key}, raise_on_error=False
    )
    return result.run_id


def test_a_submit_whose_run_died_for_good_is_asked_again(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    en, resources = small_job(tmp_path, "revived")
    with dg.instance_for_test() as instance:
        assert dg.materialize(en.assets, selection=[en.key("input_shards")], instance=instance,
                              resources=resources).success  # fmt: skip
        first = tick(en, instance, resources, None)
        (request,) = first.run_requests or []
        key = str(request.run_key)
        assert ":submit:" in key

        died = run_with_key(instance, key)  # the submit run, killed; Dagster not decided yet
        assert not tick(en, instance, resources, first.cursor).run_requests

        instance.add_run_tags(died, {WILL_RETRY_TAG: "true"})  # a retry will come: wait for it
        assert not tick(en, instance, resources, first.cursor).run_requests

        instance.add_run_tags(died, {WILL_RETRY_TAG: "false"})  # none will: ask again
        again = tick(en, instance, resources, first.cursor)
        (revived,) = again.run_requests or []
        assert revived.run_key == f"{key}:after-{died[:8]}"
        assert revived.partition_key == request.partition_key
        assert revived.asset_selection == request.asset_selection
        assert not tick(en, instance, resources, again.cursor).run_requests  # asked once

        # the revived run executes the real step: the shard's batch is created, once
        tags = {RUN_KEY_TAG: str(revived.run_key)}
        assert dg.materialize([*en.assets, *en.checks], selection=revived.asset_selection,
                              partition_key=revived.partition_key, instance=instance,
                              resources=resources, tags=tags).success  # fmt: skip
        assert emulator_server.stats()["batches_created"] == 1


def test_keys_that_succeeded_will_be_retried_or_never_ran_are_left_alone() -> None:
    with dg.instance_for_test() as instance:
        run_with_key(instance, "j:s0:submit:1", works)
        failed = run_with_key(instance, "j:s1:submit:1")
        instance.add_run_tags(failed, {WILL_RETRY_TAG: "true"})
        retry = run_with_key(instance, "j:s1:submit:1")  # Dagster's retry carries the key
        instance.add_run_tags(failed, {AUTO_RETRY_RUN_ID_TAG: retry})
        instance.add_run_tags(retry, {WILL_RETRY_TAG: "false"})  # ... and failed for good too
        requests = [dg.RunRequest(run_key=k) for k in ("j:s0:submit:1", "j:s1:submit:1", "j:s2")]
        revived, notes = revive(instance, requests)
        assert (
            [r.run_key for r in revived]
            == [
                "j:s0:submit:1",  # succeeded: its work is done
                f"j:s1:submit:1:after-{retry[:8]}",  # the original and its retry both failed
                "j:s2",  # never ran
            ]
        )
        assert len(notes) == 1 and retry in notes[0]
        assert revive(None, requests) == (requests, [])  # no instance: nothing to look up
