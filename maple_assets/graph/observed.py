"""Input files as observed source assets: an edited file makes its consumers stale by itself.

The observation's data version is the file's content digest (a local file's bytes, an S3
object's ETag and size: `maple_engine.plan.versions.input_digest`), the same digest
``input_shards`` records as its own data version. The code location's automation sensor
observes each file every ``OBSERVE_EVERY_MINUTES``; an unchanged file keeps its version, so it
never makes anything stale, and an edited one shows its consumers stale without anyone
re-running anything by hand.
"""

import os
import warnings

import dagster as dg

from maple_engine.plan.versions import input_digest
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import is_remote
from resources.storage import StorageResource

OBSERVE_EVERY_MINUTES = 1
# Read by the automation sensor's daemon, which launches the observation runs: Dagster 1.13's
# daemon observes source assets by this interval (an automation condition on an observable
# source asset is evaluated by `dg.evaluate_automation_conditions` but not by the daemon).
AUTO_OBSERVE = "dagster/auto_observe_interval_minutes"


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

    with warnings.catch_warnings():  # observable source assets are Beta in dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        observe = dg.observable_source_asset(
            key=key,
            group_name=group,
            description=f"The input file {location}, observed for changes (its content digest).",
            metadata={AUTO_OBSERVE: OBSERVE_EVERY_MINUTES},
        )
        return observe(observe_remote if is_remote(location) else observe_local)
