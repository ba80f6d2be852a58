"""Can a location be read or written? Probes run before anything is uploaded.

Local folders get a probe file created and removed in the nearest existing folder (so a
read-only mount fails here even for root, and no folder is created). S3 locations get a HEAD
(read) or a small probe object written and deleted (write), through a client with short
timeouts and one retry, so an unreachable endpoint fails in seconds, not minutes. The S3 store
under an ``s3://`` storage root must honour conditional writes and range reads, and the store
of an ``s3://`` input range reads (`maple_engine.storage.store_features`): a store that does not
is refused in one line naming it, unless the ledger's PostgreSQL database can keep the
exclusive creates the store cannot make (`check_store`).
"""

import contextlib
import os
import tempfile
import uuid
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.storage.exclusive import CreateLocks, keep_creates, kept_creates
from maple_engine.storage.s3 import ENVIRONMENT, S3Settings
from maple_engine.storage.storage import is_remote
from maple_engine.storage.store_features import (
    StoreLacks,
    object_range_reads,
    refusal,
    root_features,
)

CONNECT_TIMEOUT_S = 3
READ_TIMEOUT_S = 10


def check_readable(uri: str, what: str) -> None:
    """``uri`` (a file or s3:// object) exists and the credentials in use can read it."""
    if not is_remote(uri):
        if not os.path.isfile(uri):
            raise ConfigError(f"{what} {uri!r} does not exist or is not a file.")
        return
    fs, path = _s3(uri, what)
    try:
        with _s3_errors(uri, what):
            found = fs.info(path)
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} {uri!r} does not exist (check the bucket and key).") from exc
    if found.get("type") == "directory":
        raise ConfigError(f"{what} {uri!r} is a prefix, not a file: give the object's key.")
    lacking = range_reads_refusal(uri, what)
    if lacking is not None:
        raise StoreLacks(lacking)


def range_reads_refusal(uri: str, what: str, s3: S3Settings = ENVIRONMENT) -> str | None:
    """The line refusing the store of the object ``uri`` when it does not honour range reads;
    None when it does, or cannot be asked (the caller's own read then says why)."""
    import botocore.exceptions as bex

    try:
        found = object_range_reads(uri, s3)
    except (OSError, bex.BotoCoreError):
        return None
    return None if found.range_reads is None else refusal(what, uri, found)


def check_store(
    root: str, what: str, s3: S3Settings = ENVIRONMENT, locks: CreateLocks | None = None
) -> str | None:
    """The S3 store under the ``s3://`` folder ``root`` honours conditional writes and range
    reads (probed once per process), else it is refused in one line (`StoreLacks`). A store
    without conditional writes is taken where ``locks`` (the ledger's PostgreSQL database) can
    keep the exclusive creates: from now on they go there in this process, and the line
    saying so is returned for the caller to print (the first time only). A local ``root``:
    nothing to probe."""
    if not is_remote(root):
        return None
    with _s3_errors(root, what):
        found = root_features(root, s3)
    kept = locks if found.conditional_writes is not None else None
    if found.lacks(conditional_writes=kept is None):
        raise StoreLacks(refusal(what, root, found, writes=kept is None))
    if kept is None or kept_creates(s3) is kept:  # said once in a process
        return None
    keep_creates(s3, kept)
    return (
        f"The S3 store {found.store} does not honour conditional writes "
        f"({found.conditional_writes}): exclusive creates under {root} (leases, batch claims) "
        f"are kept in the ledger's PostgreSQL database {kept.where}."
    )


def check_writable(uri: str, what: str, folder: bool) -> None:
    """A file can be written at ``uri`` (``folder``: inside the folder/prefix ``uri``)."""
    if is_remote(uri):
        prefix = uri.rstrip("/") if folder else uri.rsplit("/", 1)[0]
        _probe_s3(f"{prefix}/.maple-probe-{uuid.uuid4().hex}", uri, what)
        return
    target = os.path.abspath(uri)
    if not folder and os.path.isdir(target):
        raise ConfigError(f"{what} {uri!r} is a folder: give a file path.")
    if folder and os.path.exists(target) and not os.path.isdir(target):
        raise ConfigError(f"{what} {uri!r} is a file, not a folder: give a folder path.")
    _probe_local(target if folder else os.path.dirname(target), uri, what)


def _probe_local(folder: str, uri: str, what: str) -> None:
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigError(
            f"{what} {uri!r} cannot be created: {existing!r} is a file, not a folder."
        )
    try:
        handle, probe = tempfile.mkstemp(prefix=".maple-probe-", dir=existing)
    except OSError as exc:
        raise ConfigError(
            f"{what} {uri!r} is not writable ({exc.strerror} in {existing!r}): choose a "
            "writable location or fix its permissions."
        ) from exc
    os.close(handle)
    os.remove(probe)


def _probe_s3(probe_uri: str, uri: str, what: str) -> None:
    fs, path = _s3(probe_uri, what)
    bucket = path.split("/", 1)[0]
    try:
        with _s3_errors(uri, what):
            fs.pipe_file(path, b"")
            fs.rm_file(path)
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{what} {uri!r}: the bucket {bucket!r} does not exist at "
            f"{ENVIRONMENT.endpoint() or 'AWS'}: create it or fix the URI."
        ) from exc


def _s3(uri: str, what: str) -> tuple[Any, str]:
    import s3fs

    fs = s3fs.S3FileSystem(
        skip_instance_cache=True,
        **ENVIRONMENT.fsspec_options(),
        config_kwargs={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "read_timeout": READ_TIMEOUT_S,
            "retries": {"max_attempts": 1, "mode": "standard"},
        },
    )
    return fs, uri.split("://", 1)[1]


@contextlib.contextmanager
def _s3_errors(uri: str, what: str) -> Any:
    """Botocore's errors as one line: no credentials, unreachable endpoint, access denied."""
    import botocore.exceptions as bex

    endpoint = ENVIRONMENT.endpoint() or "AWS S3"
    try:
        yield
    except (bex.NoCredentialsError, bex.PartialCredentialsError) as exc:
        raise ConfigError(
            f"{what} {uri!r}: no AWS credentials found. Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for this S3 location."
        ) from exc
    except (bex.EndpointConnectionError, bex.ConnectTimeoutError, bex.ReadTimeoutError) as exc:
        raise ConfigError(
            f"{what} {uri!r}: cannot reach S3 at {endpoint}. Check AWS_ENDPOINT_URL and the "
            "network."
        ) from exc
    except PermissionError as exc:
        raise ConfigError(
            f"{what} {uri!r}: access denied with the AWS credentials in use ({exc}). Use "
            "credentials that may read and write this location."
        ) from exc
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ConfigError(f"{what} {uri!r}: S3 at {endpoint} failed: {exc}.") from exc
