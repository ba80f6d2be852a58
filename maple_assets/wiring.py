"""Resources for a set of enrichments: storage, cost ledger, IO manager, their providers."""

import os
from typing import Any

from maple_assets.factory import IO_MANAGER_KEY, Enrichment, provider_key
from resources.costs import CostTracker
from resources.io_manager import ParquetIOManager
from resources.providers.registry import build_provider
from resources.storage import StorageResource

DEFAULT_EMULATOR_URL = "http://127.0.0.1:8787"


def default_storage_root() -> str:
    return os.environ.get("MAPLE_STORAGE", ".maple")


def maple_resources(
    enrichments: list[Enrichment], storage_root: str | None = None
) -> dict[str, Any]:
    """Resources the enrichments need; ``emulator`` points at MAPLE_EMULATOR_URL (no I/O here)."""
    root = storage_root or default_storage_root()
    emulator_url = os.environ.get("MAPLE_EMULATOR_URL", DEFAULT_EMULATOR_URL).rstrip("/")
    resources: dict[str, Any] = {
        "maple_storage": StorageResource(root=root),
        "maple_costs": CostTracker(storage_root=root),
        IO_MANAGER_KEY: ParquetIOManager(root=root),
    }
    for name in sorted({e.spec.provider for e in enrichments}):
        resources[provider_key(name)] = build_provider(
            name, emulator_url=emulator_url, storage_root=root
        )
    return resources
