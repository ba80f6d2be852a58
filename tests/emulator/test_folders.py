"""The emulator's layout, enforced: one folder per provider, shared machinery in ``core/``, no
import cycles, and a provider folder imports another provider's only where its API is served by
that one's (docs/architecture.md, "The emulator's layout")."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "emulator"
PROVIDERS = (
    "openai",
    "anthropic",
    "gemini",
    "bedrock",
    "azure",
    "mistral",
    "bedrock_openai",
    "openrouter",
)
#: the provider folders each may import besides its own and ``core``
SERVED_BY = {
    "openai": {"azure"},  # an Azure batch names Azure's endpoints
    "anthropic": set(),
    "gemini": {"openai"},  # the /v1 paths shared with OpenAI
    "bedrock": {"anthropic"},  # Claude records run on the Messages engine
    "azure": set(),
    "mistral": {"openai"},  # Mistral's jobs run on the OpenAI batch engine
    "bedrock_openai": {"openai"},  # Bedrock's OpenAI batches run on the OpenAI batch engine
    "openrouter": {"openai"},  # OpenRouter's inline batches run on the OpenAI batch engine
}
#: the modules of ``core`` that hold every provider's pieces
CORE_KNOWS_PROVIDERS = {"state", "http_common", "queue_limits"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each emulator module and the emulator modules it imports (lazy ones included)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle, or []."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for child in sorted(graph[node]):
            if found := visit(child, [*path, node]):
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        if found := visit(start, []):
            return found
    return []


def test_the_emulator_has_no_import_cycle() -> None:
    assert _cycle(_imports()) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_folder_imports_core_and_only_the_providers_serving_it(provider: str) -> None:
    allowed = {provider, "core", *SERVED_BY[provider]}
    problems = [
        f"{name} imports {target}"
        for name, targets in _imports().items()
        if name.startswith(f"emulator.{provider}.")
        for target in targets
        if target.split(".")[1] not in allowed
    ]
    assert problems == []


def test_core_imports_the_provider_folders_only_where_it_holds_their_pieces() -> None:
    problems = [
        f"{name} imports {target}"
        for name, targets in _imports().items()
        if name.startswith("emulator.core.") and name.split(".")[2] not in CORE_KNOWS_PROVIDERS
        for target in targets
        if target.split(".")[1] in PROVIDERS
    ]
    assert problems == []


def test_the_app_assembles_every_provider_folder() -> None:
    app = _imports()["emulator.app"]
    assert {f"emulator.{p}.routes" for p in PROVIDERS} <= app
