"""What an S3-compatible store must honour for Maple, probed once per process.

Leases and batch claims (`maple_engine.storage.leases`) rest on one exclusive create: a
PutObject with ``If-None-Match: *`` that the store refuses (412 ``PreconditionFailed``) when the
key exists. Reading Parquet and CSV in parts rests on range reads: a ranged GET answered 206 with
just those bytes. AWS S3, SeaweedFS and MinIO honour both; a store that ignores the header
overwrites the object and answers 200 (two drivers of one job would both believe they hold its
lease), and one that ignores ``Range`` answers 200 (polars stops with "Received non-partial
response when range requested"). Nothing in either answer is an error, so the store is probed:
a random key under the root put twice with ``If-None-Match: *`` (the second must be refused),
then a ranged GET of it, then the key deleted. The answer is kept per root and store (endpoint)
for the life of the process: one probe per process.

An input on S3 is probed without writing: a ranged GET of its first bytes.
"""

import contextlib
import dataclasses
import threading
import uuid
from typing import Any

import fsspec.asyn

from maple_engine.errors import ConfigError
from maple_engine.settings import COST_DB_ENV
from maple_engine.storage.s3 import S3Settings

CONNECT_TIMEOUT_S = 3
READ_TIMEOUT_S = 10
STORES_THAT_WORK = "AWS S3, SeaweedFS or MinIO"
PROBE_BODY = b"maple store probe: 0123456789"
PROBE_RANGE = (6, 10)  # first and last byte asked for (inclusive, as in a Range header)


class StoreLacks(ConfigError):
    """The S3 store under a location does not honour what Maple relies on."""


@dataclasses.dataclass(frozen=True)
class StoreFeatures:
    """What the store at ``store`` (its endpoint, or AWS S3) did when probed: ``None`` for a
    feature honoured, else what it did instead."""

    store: str
    conditional_writes: str | None = None
    range_reads: str | None = None

    def lacks(self, *, conditional_writes: bool = True, range_reads: bool = True) -> list[str]:
        """The features it lacks, each with what it did (of those asked about)."""
        lacking = []
        if conditional_writes and self.conditional_writes is not None:
            lacking.append(f"conditional writes ({self.conditional_writes})")
        if range_reads and self.range_reads is not None:
            lacking.append(f"range reads ({self.range_reads})")
        return lacking


def store_name(s3: S3Settings) -> str:
    return s3.endpoint() or "AWS S3"


def refusal(
    what: str, uri: str, found: StoreFeatures, *, writes: bool = True, reads: bool = True
) -> str:
    """The one line that refuses ``what`` (``uri``) on a store lacking a feature: the store,
    what it lacks and what it did instead, and the fix (``writes``, ``reads``: whether its
    conditional writes, its range reads count here)."""
    writes = writes and found.conditional_writes is not None
    reads = reads and found.range_reads is not None
    lacking = found.lacks(range_reads=reads)
    harm = []
    if writes:
        harm.append("two drivers of one job could both believe they hold its lease")
    if reads:
        harm.append("Parquet and CSV could not be read in parts")
    fix = f"use an S3-compatible store that honours {'them' if len(lacking) > 1 else 'it'}"
    fix += f" ({STORES_THAT_WORK})"
    if writes and not reads:  # the ledger stands in for conditional writes only
        fix += (
            f", or set {COST_DB_ENV} to a PostgreSQL ledger (postgresql+psycopg2://...) to "
            "keep exclusive creates in its database"
        )
    return (
        f"{what} {uri!r}: the S3 store {found.store} does not honour {' nor '.join(lacking)}, "
        f"so {' and '.join(harm)}: {fix}."
    )


_FOUND: dict[tuple[str, str], StoreFeatures] = {}
_LOCK = threading.Lock()


def root_features(root: str, s3: S3Settings) -> StoreFeatures:
    """The features of the store under the ``s3://`` folder ``root``: probed at the first call
    for this root and store in this process, then remembered."""
    key = (root.rstrip("/"), store_name(s3))
    with _LOCK:
        found = _FOUND.get(key)
        if found is None:
            found = _FOUND[key] = probe_root(key[0], s3)
    return found


def forget() -> None:
    """Forget every store probed (tests that reuse an endpoint for another store)."""
    with _LOCK:
        _FOUND.clear()


def probe_root(root: str, s3: S3Settings) -> StoreFeatures:
    """Probe the store under ``root`` now (writes and deletes one small object)."""
    fs = probe_filesystem(s3)
    bucket, _, prefix = root.split("://", 1)[1].partition("/")
    key = f"{prefix}/.maple-probe-{uuid.uuid4().hex}".lstrip("/")
    try:
        conditional = _conditional_put(fs, bucket, key)
        ranged = _ranged_get(fs, bucket, key, PROBE_BODY, PROBE_RANGE)
    finally:
        with contextlib.suppress(OSError):  # a failed put's own error is what matters
            fs.call_s3("delete_object", Bucket=bucket, Key=key)
    return StoreFeatures(store_name(s3), conditional_writes=conditional, range_reads=ranged)


def object_range_reads(uri: str, s3: S3Settings) -> StoreFeatures:
    """The store's range reads, from a ranged GET of the first bytes of the object ``uri``
    (read only: an input's bucket may be read-only); an empty object tells nothing."""
    fs = probe_filesystem(s3)
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    head = fs.call_s3("head_object", Bucket=bucket, Key=key)
    size = int(head.get("ContentLength") or 0)
    if size < 2:
        return StoreFeatures(store_name(s3))
    span = (0, min(size, 8) - 2)  # not the whole object: a full answer would pass as partial
    ranged = _ranged_get(fs, bucket, key, None, span)
    return StoreFeatures(store_name(s3), range_reads=ranged)


def probe_filesystem(s3: S3Settings) -> Any:
    """An s3fs filesystem with short timeouts and one try, so an unreachable endpoint fails in
    seconds; checksums are not asked for (a ranged answer's checksum may be the whole
    object's, which would fail the read before the probe saw what the store answered)."""
    import s3fs

    return s3fs.S3FileSystem(
        skip_instance_cache=True,
        **s3.fsspec_options(),
        config_kwargs={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "read_timeout": READ_TIMEOUT_S,
            "retries": {"max_attempts": 1, "mode": "standard"},
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
        },
    )


def _conditional_put(fs: Any, bucket: str, key: str) -> str | None:
    """None if a second PutObject with ``If-None-Match: *`` is refused (412), else what the
    store did instead."""
    put = {"Bucket": bucket, "Key": key, "Body": PROBE_BODY}
    try:
        fs.call_s3("put_object", **put, IfNoneMatch="*")
    except OSError as exc:
        if error_code(exc) in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
            fs.call_s3("put_object", **put)  # the header refused: the range probe needs the key
            return f"a PutObject with If-None-Match: * was refused: {exc}"
        raise
    try:
        fs.call_s3("put_object", **put, IfNoneMatch="*")
    except OSError as exc:
        if error_code(exc) == "PreconditionFailed":
            return None
        return f"a PutObject with If-None-Match: * on an existing key failed: {exc}"
    return "a second PutObject with If-None-Match: * overwrote the object instead of a 412"


def _ranged_get(
    fs: Any, bucket: str, key: str, body: bytes | None, span: tuple[int, int]
) -> str | None:
    """None if a GET of bytes ``span`` answers 206 with just those bytes (``body``: the whole
    object, when known), else what the store answered."""
    first, last = span
    status, got = fsspec.asyn.sync(fs.loop, _get, fs, bucket, key, f"bytes={first}-{last}")
    want = last - first + 1
    right = len(got) == want and (body is None or got == body[first : last + 1])
    if status == 206 and right:
        return None
    return (
        f"a GET of bytes {first}-{last} answered {status} with {len(got)} bytes, not 206 "
        f"Partial Content with {want}"
    )


async def _get(fs: Any, bucket: str, key: str, range_: str) -> tuple[int, bytes]:
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=range_)
    data = await response["Body"].read()
    return int(response["ResponseMetadata"]["HTTPStatusCode"]), bytes(data)


def error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an s3fs error (``PreconditionFailed``, ...), if any."""
    response = getattr(exc.__cause__, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    return str(code) if code else None
