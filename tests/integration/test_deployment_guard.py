"""A local storage root or a SQLite ledger is refused at run start when the instance's run
launcher puts every run on its own machine (here: the ECS run launcher from dagster-aws), or when
a step runs on another host than the one that launched its run (Dagster's celery executor)."""

import socket
from pathlib import Path

import dagster as dg
import pytest

from emulator.server import EmulatorServer
from maple_assets.factory import enrichment
from maple_assets.wiring import wire_resources
from maple_engine.deployment import SHARE_ENV, runs_share_machine
from maple_engine.providers.registry import build_provider
from resources.run_launcher import LAUNCHED_ON_TAG

ECS = "run_launcher:\n  module: dagster_aws.ecs\n  class: EcsRunLauncher\n"


def instance_with(home: Path, config: str) -> dg.DagsterInstance:
    home.mkdir()
    (home / "dagster.yaml").write_text(config)
    return dg.DagsterInstance.from_config(str(home))


def shard_run(
    tmp_path: Path, instance: dg.DagsterInstance, url: str, tags: dict[str, str] | None = None
) -> dg.ExecuteInProcessResult:
    table = tmp_path / "t.csv"
    table.write_text("title\na\nb\n")
    en = enrichment(name="guarded", source=str(table), prompt="{title}", model="gpt-4o-mini",
                    provider="emulator")  # fmt: skip
    resources = wire_resources(
        str(tmp_path / "store"), {"emulator": build_provider("emulator", url)}
    )
    return dg.materialize(
        en.assets, selection=dg.AssetSelection.assets(en.key("input_shards")),
        instance=instance, resources=resources, raise_on_error=False, tags=tags,
    )  # fmt: skip


def test_local_root_and_sqlite_ledger_are_refused_under_a_remote_launcher(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    monkeypatch.delenv("MAPLE_COST_DB", raising=False)
    instance = instance_with(tmp_path / "home", ECS)
    assert not runs_share_machine(instance)
    result = shard_run(tmp_path, instance, emulator_server.url)
    assert not result.success
    errors = [str(e.event_specific_data) for e in result.all_events if e.is_failure]
    text = "\n".join(errors)
    assert "local to one machine" in text and "EcsRunLauncher" in text, text
    assert "MAPLE_STORAGE to s3://" in text or "MAPLE_COST_DB" in text, text
    assert not (tmp_path / "store" / "guarded").exists()  # refused before anything was written


def test_the_default_launcher_or_an_explicit_setting_allows_them(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert runs_share_machine(instance_with(tmp_path / "default", ""))
    assert runs_share_machine(None)
    monkeypatch.setenv(SHARE_ENV, "1")
    instance = instance_with(tmp_path / "home", ECS)
    assert shard_run(tmp_path, instance, emulator_server.url).success
    monkeypatch.setenv(SHARE_ENV, "0")
    assert not runs_share_machine(instance_with(tmp_path / "local", ""))


def test_a_step_away_from_the_host_that_launched_its_run_refuses_them(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    monkeypatch.delenv("MAPLE_COST_DB", raising=False)
    instance = instance_with(tmp_path / "home", "")  # Dagster's default launcher
    assert runs_share_machine(instance, launched_on=socket.gethostname())
    assert not runs_share_machine(instance, launched_on="the-daemon-host")
    tags = {LAUNCHED_ON_TAG: "the-daemon-host"}
    result = shard_run(tmp_path, instance, emulator_server.url, tags)
    assert not result.success
    text = "\n".join(str(e.event_specific_data) for e in result.all_events if e.is_failure)
    assert "its run was launched on the-daemon-host" in text, text
