"""How the storage root's S3 is reached: endpoint, region and credentials.

By default from the environment (``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, and the AWS credential chain). In a Dagster deployment they can come from
a dagster-aws ``S3Resource`` given to Maple's storage resource and IO manager
(``resources.s3_resources``): when the resource is set
up at run start (or for a sensor tick) its settings apply to every ``s3://`` access of that
process: fsspec for state files, polars for inputs and outputs, boto3 for the pre-flight checks.
One process talks to one S3 service.
"""

import dataclasses
import os
from typing import Any


@dataclasses.dataclass(frozen=True)
class S3Settings:
    """What a dagster-aws ``S3Resource`` sets; ``None`` leaves the environment's value."""

    endpoint_url: str | None = None
    region_name: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile_name: str | None = None
    unsigned: bool = False
    verify: bool | str | None = None


_ACTIVE = {"settings": S3Settings()}  # this process's settings


def configure(settings: S3Settings) -> None:
    """Use ``settings`` for every S3 access of this process (the storage resource calls it)."""
    _ACTIVE["settings"] = settings


def current() -> S3Settings:
    return _ACTIVE["settings"]


def endpoint() -> str | None:
    env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return current().endpoint_url or env


def region() -> str | None:
    env = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return current().region_name or env


def botocore_client_kwargs() -> dict[str, Any]:
    """``client_kwargs`` for s3fs / a boto3 S3 client: endpoint, region, certificate check."""
    client: dict[str, Any] = {}
    if endpoint():
        client["endpoint_url"] = endpoint()
    if region():
        client["region_name"] = region()
    if current().verify is not None:
        client["verify"] = current().verify
    return client


def fsspec_options() -> dict[str, Any]:
    """s3fs options: these settings over the environment; no stale directory listings."""
    options: dict[str, Any] = {"use_listings_cache": False}
    client = botocore_client_kwargs()
    if client:
        options["client_kwargs"] = client
    s = current()
    for name, value in (
        ("key", s.access_key_id),
        ("secret", s.secret_access_key),
        ("token", s.session_token),
        ("profile", s.profile_name),
    ):
        if value:
            options[name] = value
    if s.unsigned:
        options["anon"] = True
    return options


def polars_options() -> dict[str, Any] | None:
    """polars' ``storage_options`` (object_store's names) for an ``s3://`` URI."""
    options: dict[str, Any] = {}
    url = endpoint()
    if url:
        options["aws_endpoint_url"] = url
        options["aws_allow_http"] = str(url.startswith("http://")).lower()
    if region():
        options["aws_region"] = region()
    s = current()
    for name, value in (
        ("aws_access_key_id", s.access_key_id),
        ("aws_secret_access_key", s.secret_access_key),
        ("aws_session_token", s.session_token),
        ("aws_profile", s.profile_name),
    ):
        if value:
            options[name] = value
    if s.unsigned:
        options["aws_skip_signature"] = "true"
    if s.verify is False:
        options["aws_allow_invalid_certificates"] = "true"
    return options or None
