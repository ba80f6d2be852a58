"""Maple on Dagster: LLM enrichment of tables as Dagster assets."""

from maple_assets.factory import Enrichment, enrichment

__all__ = ["Enrichment", "enrichment"]
