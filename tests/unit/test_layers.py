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
