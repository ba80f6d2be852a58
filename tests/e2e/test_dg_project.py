"""A new ``dg`` project with this package installed, as a team that writes YAML uses it: ``dg list
components`` shows the components, ``dg scaffold defs`` writes the ``defs.yaml``, ``dg check defs``
passes it and fails a bad attribute with one line, ``dg list defs`` shows the assets, ``dg launch``
runs ``input_shards``, and the sensor's ticks drive the job to ``merged`` on a Dagster instance,
against the emulator."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from emulator.server import EmulatorServer

DG = shutil.which("dg", path=str(Path(sys.executable).parent))
PACKAGE = "yaml_team"  # the new project's module
JOB = "item_tags"
PROMPT = "Tag {title}: {description}"

# The driver a deployment's daemon stands for: tick the job's sensor, run what it requests.
DRIVE = textwrap.dedent(
    """
    import json
    import sys

    import dagster as dg

    from yaml_team.definitions import defs

    name = sys.argv[1]
    instance = dg.DagsterInstance.get()
    sensor = defs.resolve_sensor_def(f"{name}_sensor")
    assets = [*(defs.assets or []), *(defs.asset_checks or [])]
    launched = []
    for _ in range(40):
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
                assets,
                selection=request.asset_selection,
                partition_key=request.partition_key,
                instance=instance,
                resources=defs.resources,
                tags=request.tags,  # a chained submissions run: its partition range
                run_config=request.run_config,
            )
            assert outcome.success, request.run_key
            launched.append(request.run_key)
        if any(":merged:" in key for key in launched):
            break
    print(json.dumps(launched))
    """
)


def dg(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert DG is not None, "dg (dagster-dg-cli, a dev dependency) is not installed"
    return run(project, DG, *args, env=env)


def run(project: Path, *command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def check_fails(project: Path, defs_yaml: Path, text: str, env: dict[str, str]) -> str:
    """What ``dg check defs`` prints of ``defs_yaml`` written as ``text``, which it rejects."""
    defs_yaml.write_text(text, encoding="utf-8")
    failed = dg(project, "check", "defs", env=env)
    assert failed.returncode != 0, failed.stdout
    return failed.stdout + failed.stderr


def new_project(root: Path) -> Path:
    """What ``create-dagster project`` lays out, less the virtual environment: this one's."""
    project = root / "yaml-team"
    (project / PACKAGE / "defs").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [project]
            name = "yaml-team"
            version = "0.1.0"
            dependencies = ["maple-dagster"]

            [tool.dg]
            directory_type = "project"

            [tool.dg.project]
            root_module = "{PACKAGE}"
            """
        ),
        encoding="utf-8",
    )
    (project / PACKAGE / "__init__.py").write_text("", encoding="utf-8")
    (project / PACKAGE / "defs" / "__init__.py").write_text("", encoding="utf-8")
    (project / PACKAGE / "definitions.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            import dagster as dg

            defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
            """
        ),
        encoding="utf-8",
    )
    (project / "data").mkdir()
    return project


@pytest.mark.slow  # a new project, the dg CLI five times and a Dagster run: 45-100 s alone
@pytest.mark.timeout(600)
def test_a_new_dg_project_declares_checks_lists_and_runs_a_yaml_enrichment(
    tmp_path: Path, emulator_server: EmulatorServer
) -> None:
    project = new_project(tmp_path)
    items = pl.DataFrame(
        {
            "sku": [f"sku-{i}" for i in range(12)],
            "title": [f"item {i}" for i in range(12)],
            "description": ["oat milk 1l", "rye bread", "", "tea", None, "jam"] * 2,
        }
    )
    items.write_csv(project / "data" / "items.csv")
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"},
        "DAGSTER_HOME": str(home),
        "MAPLE_STORAGE": str(tmp_path / "store"),
        "MAPLE_EMULATOR_URL": emulator_server.url,
        "MAPLE_TEST_PROVIDER": "emulator",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }

    listed = dg(project, "list", "components", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    types = {entry["key"] for entry in json.loads(listed.stdout)["items"]}
    assert {"maple_assets.EnrichmentComponent", "maple_assets.EmbeddingComponent"} <= types

    scaffolded = dg(
        project, "scaffold", "defs", "maple_assets.EnrichmentComponent", JOB,
        "--source", "../../../data/items.csv", "--prompt", PROMPT, "--model", "gpt-4o-mini",
        env=env,
    )  # fmt: skip
    assert scaffolded.returncode == 0, scaffolded.stderr + scaffolded.stdout
    defs_yaml = project / PACKAGE / "defs" / JOB / "defs.yaml"
    written = defs_yaml.read_text(encoding="utf-8")
    assert f"name: {JOB}" in written and "# provider: openai" in written
    # The team's edit: the provider from the environment, small batches.
    edited = written.replace(
        "\n  # Optional, each at its default:",
        "\n  provider: \"{{ env('MAPLE_TEST_PROVIDER') }}\"\n  max_requests_per_batch: 5\n"
        "  # Optional, each at its default:",
    )
    defs_yaml.write_text(edited, encoding="utf-8")

    checked = dg(project, "check", "defs", env=env)
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "All definitions loaded successfully." in checked.stdout

    bad = edited.replace(
        "  max_requests_per_batch: 5\n", "  max_requests_per_batch: 5\n  deadline: soon\n"
    )
    line = 1 + bad.splitlines().index("  deadline: soon")
    reason = (
        f"{defs_yaml}:{line}: attributes.deadline: --deadline 'soon' is not a duration: write a "
        "number with a unit, s/m/h/d, e.g. 90s, 30m, 6h or 1h30m."
    )
    output = check_fails(project, defs_yaml, bad, env)
    assert any(row.endswith(reason) for row in output.splitlines()), output
    # A literal number outside its bound: the attributes' JSON schema (dg check yaml) has it.
    output = check_fails(project, defs_yaml, edited.replace("batch: 5\n", "batch: 0\n"), env)
    assert "attributes.max_requests_per_batch 0 is less than the minimum of 1" in output
    defs_yaml.write_text(edited, encoding="utf-8")

    shown = dg(project, "list", "defs", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assets = {asset["asset_key"]: asset for asset in json.loads(shown.stdout)["assets"]}
    stages = ("input_shards", "submissions", "raw_responses", "merged")
    assert {f"{JOB}/{stage}" for stage in stages} <= set(assets)
    merged_shown = assets[f"{JOB}/merged"]
    assert set(merged_shown["kinds"]) == {"emulator", "polars", "csv"}
    assert merged_shown["owners"] == [{"team": "default"}]  # team:default
    assert merged_shown["source"] == f"{PACKAGE}/defs/{JOB}/defs.yaml:4"  # the code reference

    first = dg(project, "launch", "--assets", f"{JOB}/input_shards", env=env)
    assert first.returncode == 0, first.stderr + first.stdout
    (project / "drive.py").write_text(DRIVE, encoding="utf-8")
    driven = run(project, sys.executable, "drive.py", JOB, env=env)
    assert driven.returncode == 0, driven.stderr
    launched = json.loads(driven.stdout.splitlines()[-1])
    # 12 rows, 5 per batch: 3 shards, sent by one chained run while the queue's limit is learned
    submits = [key.split(":submit:")[0] for key in launched if ":submit:" in key]
    assert submits == [f"{JOB}:s00000..s00002"]

    # A CSV input makes a CSV output, as `maple enrich` writes it.
    merged = pl.read_csv(tmp_path / "store" / JOB / "output" / "merged.csv", infer_schema=False)
    written_items = pl.read_csv(project / "data" / "items.csv", infer_schema=False)
    assert merged.select(items.columns).to_dicts() == written_items.to_dicts()
    assert set(merged["llm_status"]) == {"succeeded"}
    assert merged["llm_response"].to_list() == [
        f"echo: {PROMPT.format(title=t, description=d or '')}"
        for t, d in items.select("title", "description").iter_rows()
    ]


@pytest.mark.slow  # dg check defs loads the project: ~12 s
def test_dg_check_defs_names_every_bad_attribute_on_its_own_line(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    pl.DataFrame({"title": ["a"]}).write_csv(project / "data" / "items.csv")
    folder = project / PACKAGE / "defs" / JOB
    folder.mkdir()
    defs_yaml = folder / "defs.yaml"
    text = (
        "type: maple_assets.EnrichmentComponent\nattributes:\n  name: tags\n"
        "  source: data/items.csv\n  prompt: 'Tag {missing}'\n  model: gpt-4o-mini\n"
        "  provider: emulator\n  deadline: soon\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "200"}
    output = check_fails(project, defs_yaml, text, env)
    prefix = "maple_assets.components.AttributeProblem: "  # Dagster names the error's class
    rows = [row.removeprefix(prefix) for row in output.splitlines()]
    rows = [row for row in rows if row.startswith(f"{defs_yaml}:")]
    assert [row.split(": ", 2)[:2] for row in rows] == [
        [f"{defs_yaml}:8", "attributes.deadline"],
        [f"{defs_yaml}:5", "attributes.prompt"],
    ], output
    assert "'missing'" in rows[1] and "'soon' is not a duration" in rows[0]
