"""A ``defs.yaml`` enrichment through Dagster's own component loading: the same job and graph as
``enrichment()`` with the same keywords, templates rendered, paths read from the file's folder,
and each bad attribute one line naming the file, the line, the attribute and the CLI's reason."""

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import polars as pl
import pytest

from maple_assets.components import EmbeddingComponent, EnrichmentComponent, JobComponent
from maple_assets.factory import Enrichment, embedding, enrichment
from maple_assets.wiring import maple_resources
from maple_engine.errors import ConfigError
from maple_engine.inputs.checks import check_input_schema
from maple_engine.spec import build_spec

HEADER = "type: maple_assets.EnrichmentComponent\nattributes:\n"


def write_yaml(folder: Path, attributes: str, header: str = HEADER) -> Path:
    path = folder / "defs.yaml"
    path.write_text(header + attributes, encoding="utf-8")
    return path


def load(path: Path) -> JobComponent:
    """The component of ``path``, loaded as Dagster's test tree loads one (from its folder)."""
    with contextlib.chdir(path.parent):
        loaded = dg.Component.from_yaml_path(path)
    (component,) = getattr(loaded, "components", [loaded])  # a file of one component
    assert isinstance(component, JobComponent)
    return component


def load_error(path: Path) -> str:
    """The component's own error behind the one Dagster raises as it loads the file."""
    with pytest.raises(Exception) as raised:  # Dagster's wrapper, unwrapped below
        load(path)
    error: BaseException | None = raised.value
    while error is not None and not isinstance(error, ConfigError):
        error = error.__cause__
    assert error is not None, raised.value
    return str(error)


def graph_shape(defs: dg.Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    return {
        "assets": {
            key.to_user_string(): sorted(p.to_user_string() for p in graph.get(key).parent_keys)
            for key in graph.get_all_asset_keys()
            if graph.get(key).is_materializable
        },
        "checks": sorted(str(key) for key in graph.asset_check_keys),
        "sensors": sorted(s.name for s in defs.sensors or []),
    }


def python_defs(job: Enrichment) -> dg.Definitions:
    return dg.Definitions(
        assets=job.assets,
        asset_checks=job.checks,
        sensors=job.sensors,
        resources=maple_resources([job]),
    )


UPSTREAM = dg.Definitions(assets=[dg.AssetSpec(["raw", "items"])])


def test_a_yaml_enrichment_is_the_python_one(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TEST_BUDGET", "2.5")
    path = write_yaml(
        tmp_path,
        """
  name: tags
  source: raw/items
  prompt: "Tag {title}"
  model: gpt-4o-mini
  provider: emulator
  team: catalog
  budget_usd: "{{ env.TEST_BUDGET }}"
  deadline: 1h30m
  retries: {server_error: unlimited}
  response_schema:
    type: object
    properties: {tags: {type: array, items: {type: string}}}
    required: [tags]
    additionalProperties: false
  poll_interval_s: 3
""",
    )
    component = load(path)
    declared = component.declare()
    same = enrichment(
        "tags",
        dg.AssetKey(["raw", "items"]),
        "Tag {title}",
        "gpt-4o-mini",
        provider="emulator",
        team="catalog",
        budget_usd=2.5,
        deadline="1h30m",
        retries={"server_error": "unlimited"},
        response_schema={
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["tags"],
            "additionalProperties": False,
        },
        poll_interval_s=3,
    )
    assert declared.spec == same.spec and declared.spec.fingerprint() == same.spec.fingerprint()
    assert declared.policy == same.policy
    built = dg.Definitions.merge(dg.build_defs_for_component(component), UPSTREAM)
    assert graph_shape(built) == graph_shape(dg.Definitions.merge(python_defs(same), UPSTREAM))
    shards = built.resolve_asset_graph().get(dg.AssetKey(["tags", "input_shards"]))
    assert {k.to_user_string() for k in shards.parent_keys} == {"raw/items"}  # a real dependency
    # under 5 s (a provider that pushes batch events ticks at most every 5 s, polls at its own)
    assert built.resolve_sensor_def("tags_sensor").minimum_interval_seconds == 3
    assert {"maple_storage", "maple_costs", "maple_io_manager"} <= set(built.resources or {})


def test_paths_are_read_from_the_yaml_folder(tmp_path: Path) -> None:
    pl.DataFrame({"title": ["a"]}).write_parquet(tmp_path / "items.parquet")
    schema = {
        "type": "object",
        "properties": {"t": {"type": "string"}},
        "required": ["t"],
        "additionalProperties": False,
    }
    (tmp_path / "schema.json").write_bytes(orjson.dumps(schema))
    path = write_yaml(
        tmp_path,
        """
  name: vectors
  source: items.parquet
  text: "{title}"
  model: text-embedding-3-small
  provider: emulator
  dimensions: 8
""",
        header="type: maple_assets.EmbeddingComponent\nattributes:\n",
    )
    component = load(path)
    assert isinstance(component, EmbeddingComponent)
    declared = component.declare()
    same = embedding(
        "vectors", str(tmp_path / "items.parquet"), "{title}", "text-embedding-3-small",
        provider="emulator", dimensions=8,
    )  # fmt: skip
    assert declared.spec == same.spec
    assert graph_shape(dg.build_defs_for_component(component)) == graph_shape(python_defs(same))
    chat = write_yaml(
        tmp_path,
        """
  name: tags
  source: items.parquet
  prompt: "{title}"
  model: gpt-4o-mini
  response_schema: schema.json
""",
    )
    assert load(chat).declare().spec.response_schema == schema


def cli_reason(**options: Any) -> str:
    """What ``enrichment()``, and ``maple enrich`` with the same options, says of them."""
    with pytest.raises(ConfigError) as raised:
        enrichment(**{"name": "j", "source": dg.AssetKey("raw"), "model": "m", **options})
    return str(raised.value)


@pytest.mark.parametrize(
    ("attributes", "field", "line", "options"),
    [
        ("  provider: nope\n", "provider", 7, {"prompt": "{t}", "provider": "nope"}),
        ("  deadline: soon\n", "deadline", 7, {"prompt": "{t}", "deadline": "soon"}),
        ("  max_batch_bytes: 0\n", "max_batch_bytes", 7, {"prompt": "{t}", "max_batch_bytes": 0}),
        (
            "  response_schema: {type: objekt}\n",
            "response_schema",
            7,
            {"prompt": "{t}", "response_schema": {"type": "objekt"}},
        ),
        ("  retries: {nonsense: 2}\n", "retries", 7, {"prompt": "{t}", "retries": {"nonsense": 2}}),
        (
            "  provider: anthropic\n  endpoint: responses\n",
            "endpoint",
            8,
            {"prompt": "{t}", "provider": "anthropic", "endpoint": "responses"},
        ),
        (
            "  params: {reasoning_effort: low}\n",
            "params",
            7,
            {"prompt": "{t}", "params": {"reasoning_effort": "low"}},
        ),
    ],
    ids=["provider", "duration", "bound", "schema", "retry-class", "endpoint", "params"],
)
def test_a_bad_attribute_is_one_line_with_the_cli_reason(
    tmp_path: Path, attributes: str, field: str, line: int, options: dict[str, Any]
) -> None:
    path = write_yaml(
        tmp_path, f"  name: j\n  source: raw\n  prompt: '{{t}}'\n  model: m\n{attributes}"
    )
    message = load_error(path)
    assert message == f"{path}:{line}: attributes.{field}: {cli_reason(**options)}"
    assert "\n" not in message


def test_a_template_column_the_file_lacks_is_named(tmp_path: Path) -> None:
    pl.DataFrame({"title": ["a"], "description": ["b"]}).write_csv(tmp_path / "items.csv")
    path = write_yaml(
        tmp_path, "  name: j\n  source: items.csv\n  prompt: '{missing}'\n  model: m\n"
    )
    spec = build_spec(name="j", source=str(tmp_path / "items.csv"), prompt="{missing}", model="m")
    with pytest.raises(ConfigError) as raised:  # maple enrich's pre-flight check of the input
        check_input_schema(pl.read_csv(tmp_path / "items.csv").schema, spec)
    assert load_error(path) == f"{path}:5: attributes.prompt: {raised.value}"
    over = write_yaml(
        tmp_path,
        "  name: j\n  source: items.csv\n  prompt: '{title}'\n  model: m\n  output: items.csv\n",
    )
    assert load_error(over).startswith(f"{over}:7: attributes.output: The output path ")
    missing = write_yaml(tmp_path, "  name: j\n  source: gone.csv\n  prompt: '{t}'\n  model: m\n")
    assert load_error(missing) == (
        f"{missing}:4: attributes.source: "
        f"Input file {str(tmp_path / 'gone.csv')!r} does not exist or is not a file."
    )


def test_an_unset_variable_is_dagsters_own_error(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("TEST_UNSET_MODEL", raising=False)
    path = write_yaml(
        tmp_path,
        "  name: j\n  source: raw\n  prompt: '{t}'\n  model: \"{{ env('TEST_UNSET_MODEL') }}\"\n",
    )
    with pytest.raises(Exception) as raised:  # Dagster's wrapper, unwrapped below
        load(path)
    assert "Environment variable TEST_UNSET_MODEL is not set" in str(raised.value.__cause__)


def test_python_construction_takes_the_same_attributes() -> None:
    component = EnrichmentComponent(
        name="tags", source="raw/items", prompt="{t}", model="gpt-4o-mini", provider="emulator"
    )
    component.check()
    assert component.declare().spec.provider == "emulator"
    assert isinstance(
        EnrichmentComponent.model()(name="j", source="s", prompt="p", model="m"), object
    )


def test_the_readme_yaml_example_loads_as_it_says(tmp_path: Path, monkeypatch: Any) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Declaring an enrichment in YAML", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("CATALOG_BUDGET_USD", "12.5")
    path = tmp_path / "defs.yaml"
    path.write_text(example, encoding="utf-8")
    spec = load(path).declare().spec
    assert (spec.name, spec.provider, spec.budget_usd, spec.deadline_s) == (
        "product_attributes",
        "openai",
        12.5,
        6 * 3600.0,
    )
    assert spec.response_schema is not None and spec.response_schema["required"] == ["brand"]


def test_an_installed_copy_of_the_sample_loads_its_yaml_declarations(tmp_path: Path) -> None:
    """A non-editable install has no pyproject.toml above the package: the sample still finds
    maple_assets/defs/ (from the package, not the project file)."""
    root = Path(__file__).resolve().parents[2]
    shutil.copytree(
        root / "maple_assets",
        tmp_path / "maple_assets",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    script = (
        "import dagster as dg, maple_assets\n"
        "from maple_assets.definitions import defs\n"
        "print(maple_assets.__file__)\n"
        "print(defs.resolve_asset_graph().has(dg.AssetKey(['product_tags', 'merged'])))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "maple_assets" / "__init__.py"), "True"]


def test_extra_body_a_provider_takes_none_of_is_refused_as_the_cli_refuses_it(
    tmp_path: Path,
) -> None:
    path = write_yaml(
        tmp_path,
        "  name: j\n  source: raw\n  prompt: '{t}'\n  model: m\n  provider: anthropic\n"
        "  extra_body: {custom_llm_provider: openai}\n",
    )
    assert load_error(path) == (
        f"{path}:8: attributes.extra_body: --extra-body: anthropic sends no control calls that "
        "take extra fields (only OpenAI-style batch APIs: files and batches); drop it."
    )


def test_extra_body_giving_a_field_maple_sets_is_refused_as_the_cli_refuses_it(
    tmp_path: Path,
) -> None:
    path = write_yaml(
        tmp_path,
        "  name: j\n  source: raw\n  prompt: '{t}'\n  model: m\n  provider: openai\n"
        "  extra_body: {completion_window: 1h}\n",
    )
    assert load_error(path) == (
        f"{path}:8: attributes.extra_body: --extra-body completion_window: Maple sets that field "
        "of the batch create or upload itself; drop it."
    )


def test_a_source_typed_from_the_project_root_is_found_there(tmp_path: Path) -> None:
    """``source: data/items.csv`` written as the user sees it from the project's root (where
    its pyproject.toml is) is read there when the YAML's folder has no such file; a file beside
    the YAML comes first."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "data").mkdir()
    pl.DataFrame({"title": ["a"]}).write_csv(tmp_path / "data" / "items.csv")
    folder = tmp_path / "src" / "p" / "defs" / "tags"
    folder.mkdir(parents=True)
    path = write_yaml(
        folder, "  name: j\n  source: data/items.csv\n  prompt: '{title}'\n  model: m\n"
    )
    assert load(path).options()["source"] == str(tmp_path / "data" / "items.csv")
    (folder / "data").mkdir()
    pl.DataFrame({"title": ["b"]}).write_csv(folder / "data" / "items.csv")
    assert load(path).options()["source"] == str(folder / "data" / "items.csv")


def test_every_bad_attribute_is_its_own_line(tmp_path: Path) -> None:
    """Three bad attributes: three lines, each naming its line, its attribute and the CLI's
    reason, in the order `maple enrich` checks them (the spec's own fields first)."""
    path = write_yaml(
        tmp_path,
        "  name: j\n  source: gone.csv\n  prompt: '{t}'\n  model: m\n  provider: anthropic\n"
        "  endpoint: responses\n  deadline: soon\n",
    )
    lines = load_error(path).splitlines()
    assert lines == [
        f"{path}:9: attributes.deadline: " + cli_reason(prompt="{t}", deadline="soon"),
        f"{path}:4: attributes.source: "
        f"Input file {str(tmp_path / 'gone.csv')!r} does not exist or is not a file.",
        f"{path}:8: attributes.endpoint: "
        + cli_reason(prompt="{t}", provider="anthropic", endpoint="responses"),
    ]
