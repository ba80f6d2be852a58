"""A job's Dagster names: any job name a user types, mapped to what Dagster accepts.

Job names may hold letters, digits, ``_``, ``-`` and ``.``; Dagster names (asset groups, sensors,
partitions definitions, ops) only letters, digits and ``_``. A name Dagster accepts stays as it
is; any other has each other character replaced by ``_`` and a short hash of the typed name
appended, so ``rye-bread`` and ``rye.bread`` never meet as one Dagster name. The job's folder,
costs and output keep the typed name.
"""

import hashlib
import re

import dagster as dg

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def dagster_name(job: str) -> str:
    """``job`` as a Dagster name: itself if valid, else a cleaned, hash-suffixed spelling."""
    clean = _INVALID.sub("_", job)
    if clean == job:
        return job
    return f"{clean}_{hashlib.sha256(job.encode()).hexdigest()[:8]}"


def asset_key(job: str, asset: str) -> dg.AssetKey:
    """The key of one of the job's assets (``input_shards``, ..., ``merged``)."""
    return dg.AssetKey([dagster_name(job), asset])
