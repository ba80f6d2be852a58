"""The shard partitions of an enrichment's per-shard assets: one dynamic partition per shard.

Partition keys are the engine's shard keys (``maple_engine.plan.shards.shard_key``).
"""

import dagster as dg


def shard_partitions(enrichment_name: str) -> dg.DynamicPartitionsDefinition:
    """The dynamic partitions (one per shard) of an enrichment's per-shard assets."""
    return dg.DynamicPartitionsDefinition(name=f"{enrichment_name}_shards")
