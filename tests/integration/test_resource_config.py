"""What the Dagster UI shows as a resource's config is what the run uses.

The code location's resources are read the way the webserver reads them (the repository
snapshot behind the UI's resource pages) and built the way a run builds them. For every
resource the values shown are the values in use (storage root, ledger, base URLs, limits); an
API key is shown as the name of its environment variable, and its value reaches the run's
provider but never the snapshot. Nothing is read from the environment after loading, so
changing ``MAPLE_STORAGE`` between load and run changes nothing either.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster import serialize_value
from dagster._core.remote_representation.external_data import (
    RepositorySnap,
    ResourceConfigEnvVarSnap,
)

from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources

SECRET = "sk-shown-nowhere-0123456789"
KEYS = {
    "OPENAI_API_KEY": SECRET,
    "ANTHROPIC_API_KEY": SECRET + "-anthropic",
    "GEMINI_API_KEY": SECRET + "-gemini",
}
PROVIDERS = ("openai", "emulator", "anthropic", "gemini-realtime", "openai-realtime")
MODELS = {"anthropic": "claude-haiku-4-5", "gemini-realtime": "gemini-2.5-flash"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "store"))
    monkeypatch.setenv("MAPLE_COST_DB", f"sqlite:///{tmp_path}/costs.sqlite")
    monkeypatch.setenv("MAPLE_EMULATOR_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    source = tmp_path / "in.csv"
    source.write_text("name\na\n")
    yield source


def code_location(source: Path) -> dg.Definitions:
    """A code location with one enrichment per provider, wired as definitions.py wires it."""
    enrichments = [
        enrichment(
            name="job_" + name.replace("-", "_"),
            source=str(source),
            prompt="hi {name}",
            model=MODELS.get(name, "gpt-4o-mini"),
            provider=name,
        )
        for name in PROVIDERS
    ]
    assets = [a for e in enrichments for a in e.assets]
    return dg.Definitions(assets=assets, resources=maple_resources(enrichments))


def shown(defs: dg.Definitions) -> dict[str, dict[str, Any]]:
    """Each resource's configured values as the UI shows them (an EnvVar as ``("env", name)``)."""
    snap = RepositorySnap.from_def(defs.get_repository_def())
    return {r.name: {k: _value(v) for k, v in r.configured_values.items()} for r in snap.resources}


def _value(value: Any) -> Any:
    if isinstance(value, ResourceConfigEnvVarSnap):
        return ("env", value.name)
    return json.loads(value)


def test_every_configured_value_shown_is_the_value_the_run_uses(env: Path) -> None:
    defs = code_location(env)
    config = shown(defs)
    resources = defs.resources or {}
    with dg.build_resources(resources) as built:
        for name, values in config.items():
            if name == "maple_io_manager":
                continue  # built as the IO manager itself: checked below
            resource = getattr(built, name)
            for field, value in values.items():
                expected = os.environ[value[1]] if isinstance(value, tuple) else value
                assert getattr(resource, field) == expected, (name, field)
        root = config["maple_storage"]["root"]
        assert built.maple_storage.storage().root == root
        assert str(built.maple_io_manager._base_path) == root
        assert config["maple_costs"]["database_url"] == ("env", "MAPLE_COST_DB")
        assert built.maple_costs.resolved_url() == os.environ["MAPLE_COST_DB"]
        assert built.provider_anthropic.intent_root == root
        assert built.provider_gemini_realtime.checkpoint_root == root


def test_keys_are_shown_as_variable_names_and_used_as_their_values(env: Path) -> None:
    defs = code_location(env)
    config = shown(defs)
    assert config["provider_openai"]["api_key"] == ("env", "OPENAI_API_KEY")
    assert config["provider_anthropic"]["api_key"] == ("env", "ANTHROPIC_API_KEY")
    assert config["provider_gemini_realtime"]["api_key"] == ("env", "GEMINI_API_KEY")
    assert config["provider_openai"]["base_url"] == "http://127.0.0.1:9/v1"
    assert config["provider_emulator"]["base_url"] == "http://127.0.0.1:9/v1"
    assert config["provider_emulator"]["api_key"] == "emulator"  # no secret: no variable
    # the database real-time runs share their rate limit through: the ledger's, a password in it
    assert config["provider_openai_realtime"]["rate_share_db"] == ("env", "MAPLE_COST_DB")
    assert "rate_share_db" not in config["provider_openai"]
    with dg.build_resources(defs.resources or {}) as built:
        headers = built.provider_openai_realtime.auth_headers()
        assert headers == {"Authorization": f"Bearer {SECRET}"}
        assert SECRET not in repr(built.provider_openai) + repr(built.provider_anthropic)
        assert built.provider_openai.resolved_base_url() == "http://127.0.0.1:9/v1"
    snapshot = serialize_value(RepositorySnap.from_def(defs.get_repository_def()))
    assert not [value for value in KEYS.values() if value in snapshot]
    assert os.environ["MAPLE_COST_DB"] not in snapshot  # the ledger's URL: a password in it


def test_the_run_uses_what_was_loaded_not_the_environment_of_the_moment(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Except the secrets shown as variables (keys, the ledger's URL): a run reads those."""
    defs = code_location(env)
    root = shown(defs)["maple_storage"]["root"]
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("MAPLE_COST_DB", f"sqlite:///{tmp_path}/other.sqlite")
    with dg.build_resources(defs.resources or {}) as built:
        assert built.maple_storage.storage().root == root
        assert built.maple_costs.resolved_url() == f"sqlite:///{tmp_path}/other.sqlite"
        assert built.provider_openai_realtime.rate_share_db == f"sqlite:///{tmp_path}/other.sqlite"
        assert built.provider_openai_realtime.checkpoint_root == root


def test_a_missing_key_fails_before_the_run_starts(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    defs = code_location(env)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with (
        pytest.raises(dg.DagsterInvalidConfigError, match="ANTHROPIC_API_KEY"),
        dg.build_resources(defs.resources or {}),
    ):
        pass


SHOW_DEFINITIONS = """
import json
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster import serialize_value
from maple_assets.definitions import defs
snap = RepositorySnap.from_def(defs.get_repository_def())
names = [r.name for r in snap.resources]
print(json.dumps({"snapshot": serialize_value(snap), "resources": names}))
"""


def test_the_sample_code_location_shows_no_key(tmp_path: Path) -> None:
    """``maple_assets.definitions`` as the code server loads it, with a key in its environment:
    the sample runs on OpenAI then, and the key appears nowhere in what the UI reads."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": SECRET}
    env |= {"MAPLE_STORAGE": str(tmp_path / "store"), "DAGSTER_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SHOW_DEFINITIONS],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert "provider_openai" in shown["resources"]
    assert SECRET not in shown["snapshot"] and SECRET not in done.stderr
    assert '"OPENAI_API_KEY"' in shown["snapshot"]
