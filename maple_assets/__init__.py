"""Maple on Dagster: LLM enrichment of tables as Dagster assets.

Every name loads on first use, so ``import maple_assets`` stays cheap and the ``maple`` command
can take Ctrl-C from its first instruction, before Dagster is imported."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from maple_assets.api.errors import InvalidJob, JobBusy, SetupError, UsageError
    from maple_assets.api.jobs import JobHandle, enrich, submit
    from maple_assets.api.result import Result
    from maple_assets.components import EmbeddingComponent, EnrichmentComponent
    from maple_assets.factory import Enrichment, enrichment
    from maple_assets.rpc import maple_job

_HOMES = {
    "EnrichmentComponent": "maple_assets.components",
    "EmbeddingComponent": "maple_assets.components",
    "Enrichment": "maple_assets.factory",
    "enrichment": "maple_assets.factory",
    "enrich": "maple_assets.api.jobs",
    "submit": "maple_assets.api.jobs",
    "JobHandle": "maple_assets.api.jobs",
    "Result": "maple_assets.api.result",
    "UsageError": "maple_assets.api.errors",
    "InvalidJob": "maple_assets.api.errors",
    "SetupError": "maple_assets.api.errors",
    "JobBusy": "maple_assets.api.errors",
    "maple_job": "maple_assets.rpc",
}
__all__ = [
    "EmbeddingComponent",
    "Enrichment",
    "EnrichmentComponent",
    "InvalidJob",
    "JobBusy",
    "JobHandle",
    "Result",
    "SetupError",
    "UsageError",
    "enrich",
    "enrichment",
    "maple_job",
    "submit",
]


def __dir__() -> list[str]:
    """The lazy names too: ``dg`` finds the components by listing the package."""
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(name)
