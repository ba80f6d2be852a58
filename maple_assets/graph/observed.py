"""Input files as observed source assets: an edited file makes its consumers stale by itself.

The observation's data version is the file's content digest (a local file's bytes, an S3
object's ETag and size: `maple_engine.plan.versions.input_digest`), the same digest
``input_shards`` records as its own data version. Each file has a watch sensor (``NAME_watch``,
running by default) that looks at it every ``WATCH_EVERY_S`` seconds in the sensor's own
process and records an observation only when the digest changed: no run is launched to look at
a file (an observation run a minute would be 1,440 runs a day in the Runs page), an unchanged
file never makes anything stale, and an edited one shows its consumers stale without anyone
re-running anything by hand. A local file is hashed again only when its size or modification
time changed. "Observe" in the UI still runs an observation on demand.
"""

import os
import warnings
from typing import Any

import dagster as dg
import orjson

from maple_engine.plan.versions import input_digest
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import is_remote
from resources.storage import StorageResource

WATCH_EVERY_S = 60
DATA_VERSION_TAG = "dagster/data_version"  # how an observation event carries its data version


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
        )
        return observe(observe_remote if is_remote(location) else observe_local)


def file_watch(key: dg.AssetKey, uri: str, name: str) -> dg.SensorDefinition:
    """The sensor ``name`` that records an observation of ``key`` (the file ``uri``) each
    time its content digest changes, and launches nothing."""
    location = file_location(uri)
    remote = is_remote(location)

    def look(context: dg.SensorEvaluationContext, s3: S3Settings | None) -> dg.SensorResult:
        seen: dict[str, Any] = orjson.loads(context.cursor) if context.cursor else {}
        stat = None if remote else _stat(location)
        if stat is not None and stat == seen.get("stat"):
            return dg.SensorResult(skip_reason=dg.SkipReason("unchanged (size and time)"))
        digest = input_digest(location, s3)
        cursor = orjson.dumps({"stat": stat, "digest": digest}).decode()
        if digest == seen.get("digest"):
            return dg.SensorResult(cursor=cursor, skip_reason=dg.SkipReason("same content"))
        seen_as = dg.AssetObservation(
            asset_key=key,
            tags={DATA_VERSION_TAG: digest},
            metadata={"path": dg.MetadataValue.path(location)},
        )
        return dg.SensorResult(asset_events=[seen_as], cursor=cursor)

    description = f"Records an observation of {location} when its content changes."
    if remote:

        @dg.sensor(
            name=name,
            minimum_interval_seconds=WATCH_EVERY_S,
            default_status=dg.DefaultSensorStatus.RUNNING,
            description=description,
        )
        def watch_remote(
            context: dg.SensorEvaluationContext, maple_storage: StorageResource
        ) -> dg.SensorResult:
            return look(context, maple_storage.s3_settings())

        return watch_remote

    @dg.sensor(
        name=name,
        minimum_interval_seconds=WATCH_EVERY_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=description,
    )
    def watch_local(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return look(context, None)

    return watch_local


def _stat(path: str) -> list[int] | None:
    """A local file's size and modification time (ns); None when it cannot be read."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]
