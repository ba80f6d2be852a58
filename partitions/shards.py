"""The shard partitions of an enrichment's per-shard assets: one dynamic partition per shard.

Partition keys are the engine's shard keys (``maple_engine.plan.shards.shard_key``): a new
version of the job cuts new keys (``v2-s00000``). The partitions are the current version's
shards, and also, while an unfinished backfill targets them, an earlier version's: Dagster fails
a backfill whose targeted partitions were deleted, and "Materialize all" on an enrichment is such
a backfill, stored with the partitions of the moment it was launched, before its own
``input_shards`` run cuts the new version. Those superseded partitions go as soon as no
unfinished backfill targets them (the enrichment's sensor looks at every tick).
"""

from collections.abc import Sequence

import dagster as dg

from partitions.backfills import backfill_targets


def shard_partitions(enrichment_name: str) -> dg.DynamicPartitionsDefinition:
    """The dynamic partitions (one per shard) of an enrichment's per-shard assets."""
    return dg.DynamicPartitionsDefinition(name=f"{enrichment_name}_shards")


def current_partitions(
    instance: dg.DagsterInstance,
    name: str,
    keys: Sequence[str],
    assets: Sequence[dg.AssetKey],
) -> None:
    """Make the partitions ``name`` the shards ``keys`` of the current version: new ones added,
    an earlier version's removed unless an unfinished backfill of ``assets`` targets them (their
    answers live on in the response store, and a version cut again re-adds its keys)."""
    existing = instance.get_dynamic_partitions(name)
    wanted = set(keys)
    new = [k for k in keys if k not in set(existing)]
    if new:
        instance.add_dynamic_partitions(name, new)
    superseded = [k for k in existing if k not in wanted]
    if not superseded:
        return
    held = backfill_targets(instance, assets)
    for old in superseded:
        if old not in held:
            instance.delete_dynamic_partition(name, old)
