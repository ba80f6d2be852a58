"""Maple on Dagster: LLM enrichment of tables as Dagster assets.

``enrichment`` and ``Enrichment`` load on first use, so the ``maple`` command can take Ctrl-C
from its first instruction, before Dagster is imported."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from maple_assets.factory import Enrichment, enrichment

__all__ = ["Enrichment", "enrichment"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from maple_assets import factory

        return getattr(factory, name)
    raise AttributeError(name)
