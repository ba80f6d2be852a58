"""The layer order, enforced: engine <- resources <- Dagster definitions <- CLI.

The engine (``maple_engine``) imports no Dagster module and nothing above it; ``resources``
(Dagster resources) and ``partitions`` import only the engine; the Dagster definitions in
``maple_assets`` never import the CLI (``maple_assets.cli``). Configuration flows down: only
``maple_engine.settings`` reads the environment, and only the entry points (the wiring, the
code location, the CLI) load `Settings`."""

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "maple_engine": ("dagster", "dagster_aws", "maple_assets", "resources", "partitions"),
    "resources": ("maple_assets", "partitions"),
    "partitions": ("maple_assets", "resources"),
    "emulator": ("maple_engine", "maple_assets", "resources", "partitions"),
}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (lazy imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def offending(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(ROOT)} imports {module}")
    return found


def test_each_layer_imports_only_the_layers_below() -> None:
    problems = [p for folder, bad in FORBIDDEN.items() for p in offending(folder, bad)]
    assert problems == []


def test_dagster_definitions_never_import_the_cli() -> None:
    problems = []
    for path in sorted((ROOT / "maple_assets").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "maple_assets").parts:
            continue
        problems += [
            f"{path.relative_to(ROOT)} imports {module}"
            for module in imported_modules(path)
            if module.startswith("maple_assets.cli")
        ]
    assert problems == []


def test_the_whole_engine_imports_without_dagster() -> None:
    """Import every engine module in a fresh interpreter: no ``dagster`` module gets loaded."""
    modules = [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted((ROOT / "maple_engine").rglob("*.py"))
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('dagster')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


ENV_READERS = {
    "maple_engine/settings.py",  # Settings, the knobs and the AWS_* default of S3 access
    "maple_engine/storage/claims.py",  # the Dagster run id, to name a lease's holder
}
ENV_READS = re.compile(r"os\.environ|os\.getenv|\bSettings\.load|\bSettings\(")


def test_only_settings_reads_the_environment() -> None:
    """Engine classes and resources take plain values: what the UI shows is what runs."""
    found = []
    for folder in ("maple_engine", "resources", "partitions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            text = path.read_text(encoding="utf-8")
            if name not in ENV_READERS and ENV_READS.search(text):
                found.append(name)
    assert found == []


# -- inside the engine: the stage order ---------------------------------------------------------
#: The engine's floors, from the ground up: a module imports only its own floor and those below.
#: The stages follow the data (plan -> submit -> collect -> merge); the canary, which runs a
#: sample through all of them before a version is planned, and the steps the assets, the
#: sensor and the command line share, stand on top. Providers, the ledger and the real-time
#: sending stage are below every stage; storage below them; the shared records on the ground.
ENGINE_FLOORS: tuple[tuple[str, ...], ...] = (
    # the ground: shared records and settings that import nothing else of the engine
    ("model", "errors", "durations", "failures", "policy", "settings", "crashpoints", "memory"),
    ("label_field",),  # a response schema's one enum or boolean field (the spec checks it)
    ("deployment", "report"),
    ("storage",),
    ("providers",),
    ("ledger",),  # prices read the providers' capabilities
    ("send",),  # a real-time attempt: pacing, checkpoints, rate shares (the ledger's table)
    ("spec",),
    ("inputs",),
    ("state",),
    ("job",),
    ("work",),
    ("plan",),
    ("submit",),
    ("collect",),
    ("merge",),
    ("steps",),
    ("canary",),
    ("distill",),  # sample, train, gate, score: over a chat job's and an embedding job's output
)
#: Imports allowed to run up the order, each with its reason (none today).
ENGINE_EXCEPTIONS: dict[tuple[str, str], str] = {}


def engine_unit(module: str) -> str | None:
    """The floor's unit of an engine module: its folder, or the module itself at the top."""
    parts = module.split(".")
    return parts[1] if parts[0] == "maple_engine" and len(parts) > 1 else None


def engine_imports() -> list[tuple[str, str, str]]:
    """(importing file, its unit, the imported unit) for every import between engine units."""
    found = []
    for path in sorted((ROOT / "maple_engine").rglob("*.py")):
        rel = path.relative_to(ROOT / "maple_engine")
        if rel.name == "__init__.py" and len(rel.parts) == 1:
            continue
        unit = rel.parts[0].removesuffix(".py")
        for module in imported_modules(path):
            target = engine_unit(module)
            if target is not None and target != unit:
                found.append((str(path.relative_to(ROOT)), unit, target))
    return found


def test_every_engine_unit_has_a_floor() -> None:
    units = {p.name.removesuffix(".py") for p in (ROOT / "maple_engine").iterdir()}
    units -= {"__init__", "__pycache__"}
    placed = {unit for floor in ENGINE_FLOORS for unit in floor}
    assert units - placed == set(), "give each new engine module or folder its floor"
    assert placed - units == set(), "a floor names a unit that is gone"


def test_the_engine_imports_only_down_its_stage_order() -> None:
    floor = {unit: n for n, units in enumerate(ENGINE_FLOORS) for unit in units}
    upward = [
        f"{path} ({unit}) imports {target}"
        for path, unit, target in engine_imports()
        if floor[target] > floor[unit] and (unit, target) not in ENGINE_EXCEPTIONS
    ]
    assert upward == []


def test_no_two_engine_units_import_each_other() -> None:
    pairs = {(unit, target) for _, unit, target in engine_imports()}
    both_ways = sorted({tuple(sorted(p)) for p in pairs if (p[1], p[0]) in pairs})
    assert both_ways == []


def test_only_the_providers_import_a_provider_folder() -> None:
    """The rest of the engine reaches a provider through the registry and its capabilities
    (its rules included: ``ProviderCapabilities.rules``), never its folder."""
    folders = {p.name for p in (ROOT / "maple_engine" / "providers").iterdir() if p.is_dir()}
    folders -= {"__pycache__"}
    found = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "maple_engine").rglob("*.py"))
        if path.relative_to(ROOT / "maple_engine").parts[0] != "providers"
        for module in imported_modules(path)
        if module.split(".")[:2] == ["maple_engine", "providers"]
        and len(module.split(".")) > 2
        and module.split(".")[2] in folders
    ]
    assert found == []


def test_the_engine_scan_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan reads lazy imports too: an import inside a function counts."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from maple_engine.steps import collect_shard\n")
    assert "maple_engine.steps" in imported_modules(sample)


def module_imports() -> dict[str, set[str]]:
    """Every engine module and the engine modules it imports (lazy imports included)."""
    paths = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((ROOT / "maple_engine").rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        graph[name] = {n for n in names if n in paths and n != name}
    return graph


def test_no_engine_module_imports_itself_back() -> None:
    """No cycle among the engine's modules, inside a folder either (the provider seam's
    `maple_engine.providers.decorations` sits below `maple_engine.providers.base`, the lanes
    of `maple_engine.send.lane` below the deadline's)."""
    graph = module_imports()
    cycles = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module == start:
                cycles.append(start)
                break
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
    assert cycles == []
