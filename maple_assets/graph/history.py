"""Where an earlier version's shards are read in the UI. A new version cuts new shard keys and
the earlier version's partitions leave the Partitions tab once no backfill targets them
(`maple_assets.graph.shard_partitions`); their runs stay, tagged ``maple/job`` and
``maple/version``, each with its materializations, checks and figures per shard. So
``input_shards`` links each earlier version's runs in the run list, filtered by those tags."""

from typing import Any
from urllib.parse import quote

import dagster as dg

from maple_assets.graph.tags import JOB, VERSION

#: The earlier versions linked one by one, newest first; the job's every run links the rest.
SHOWN = 10


def runs_link(job: str, version: int | None = None) -> str:
    """The UI's run list filtered to ``job``'s runs (of ``version``, if given)."""
    tags = [f"tag:{JOB}={job}", *([f"tag:{VERSION}={version}"] if version else [])]
    return "/runs?" + "&".join(f"q%5B%5D={quote(tag, safe='')}" for tag in tags)


def earlier_versions(job: str, number: int) -> dict[str, Any]:
    """``earlier_versions`` metadata of version ``number``: links to each earlier version's
    runs (none for version 1)."""
    if number <= 1:
        return {}
    lines = [
        f"- [version {n}: its runs, shards and figures]({runs_link(job, n)})"
        for n in range(number - 1, max(0, number - 1 - SHOWN), -1)
    ]
    if number - 1 > SHOWN:
        lines.append(f"- [every run of {job}]({runs_link(job)})")
    return {"earlier_versions": dg.MetadataValue.md("\n".join(lines))}
