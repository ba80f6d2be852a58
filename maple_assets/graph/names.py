"""A job's Dagster names: any job name a user types, mapped to what Dagster accepts.

Job names may hold letters, digits, ``_``, ``-`` and ``.``; Dagster names (asset groups, sensors,
partitions definitions, ops) only letters, digits and ``_``. A name Dagster accepts stays as it
is; any other has each other character replaced by ``_`` and a short hash of the typed name
appended, so ``rye-bread`` and ``rye.bread`` never meet as one Dagster name. The job's folder,
costs and output keep the typed name.
"""

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class JobKeys:
    """The asset keys of one job's graph, the one place they are formed: ``[*prefix, the job's
    Dagster name, asset]`` for ``input_file``, ``input_shards``, ..., ``merged``. With no prefix
    (the default), ``[job, asset]``."""

    job: str
    prefix: tuple[str, ...] = ()

    def __call__(self, asset: str) -> dg.AssetKey:
        return dg.AssetKey([*self.prefix, dagster_name(self.job), asset])
