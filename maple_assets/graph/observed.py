"""Input files as observed source assets: an edited file makes its consumers stale by itself.

The observation's data version is the file's content digest (a local file's bytes, an S3
object's ETag and size: `maple_engine.plan.versions.input_digest`), the same digest
``input_shards`` records as its own data version. The code location's automation sensor
observes each file every minute (``OBSERVE_CRON``); an unchanged file keeps its version, so it
never makes anything stale, and an edited one shows its consumers stale without anyone
re-running anything by hand.
"""

import os

import dagster as dg

from maple_engine.plan.versions import input_digest
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import is_remote
from resources.storage import StorageResource

OBSERVE_CRON = "* * * * *"  # every minute


def file_location(uri: str) -> str:
    """A local path made absolute (metadata shows where the file is); a URI unchanged."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def observed_file(key: dg.AssetKey, uri: str, group: str) -> dg.SourceAsset:
    """The file ``uri`` as an observable source asset (an ``s3://`` one is reached as the
    ``maple_storage`` resource reaches its root)."""
    location = file_location(uri)

    def result(s3: S3Settings | None) -> dg.ObserveResult:
        return dg.ObserveResult(
            data_version=dg.DataVersion(input_digest(location, s3)),
            metadata={"path": dg.MetadataValue.path(location)},
        )

    def observe_local() -> dg.ObserveResult:
        return result(None)

    def observe_remote(maple_storage: StorageResource) -> dg.ObserveResult:
        return result(maple_storage.s3_settings())

    observe = dg.observable_source_asset(
        key=key,
        group_name=group,
        description=f"The input file {location}, observed for changes (its content digest).",
        automation_condition=dg.AutomationCondition.cron_tick_passed(OBSERVE_CRON),
    )
    return observe(observe_remote if is_remote(location) else observe_local)
