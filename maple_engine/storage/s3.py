"""How an ``s3://`` location is reached: endpoint, region and credentials, per `Storage`.

A `Storage` carries its `S3Settings` (``Storage(root, s3=S3Settings(...))``) and hands them to
every ``s3://`` access made through it: fsspec for state files, polars for inputs and outputs,
boto3 for the pre-flight checks. In a Dagster deployment the storage resource and the IO
manager build them from their dagster-aws ``S3Resource`` (``resources.s3_resources``); nothing
is shared by the process, so two resources may talk to two S3 services. A setting left ``None``
falls back to the environment (``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, and the AWS credential chain): ``S3Settings()`` is the environment's.
"""

import dataclasses
from typing import Any

from maple_engine.settings import aws_environment


@dataclasses.dataclass(frozen=True)
class S3Settings:
    """What a dagster-aws ``S3Resource`` sets; ``None`` leaves the environment's value."""

    endpoint_url: str | None = None
    region_name: str | None = None
    access_key_id: str | None = dataclasses.field(default=None, repr=False)
    secret_access_key: str | None = dataclasses.field(default=None, repr=False)
    session_token: str | None = dataclasses.field(default=None, repr=False)
    profile_name: str | None = None
    unsigned: bool = False
    verify: bool | str | None = None

    def endpoint(self) -> str | None:
        return self.endpoint_url or aws_environment()["endpoint_url"]

    def region(self) -> str | None:
        return self.region_name or aws_environment()["region_name"]

    def botocore_client_kwargs(self) -> dict[str, Any]:
        """``client_kwargs`` for s3fs / a boto3 S3 client: endpoint, region, certificate check."""
        client: dict[str, Any] = {}
        if self.endpoint():
            client["endpoint_url"] = self.endpoint()
        if self.region():
            client["region_name"] = self.region()
        if self.verify is not None:
            client["verify"] = self.verify
        return client

    def fsspec_options(self) -> dict[str, Any]:
        """s3fs options: these settings over the environment; no stale directory listings."""
        options: dict[str, Any] = {"use_listings_cache": False}
        client = self.botocore_client_kwargs()
        if client:
            options["client_kwargs"] = client
        options |= self._given(key="access_key_id", secret="secret_access_key")
        options |= self._given(token="session_token", profile="profile_name")
        if self.unsigned:
            options["anon"] = True
        return options

    def polars_options(self) -> dict[str, Any] | None:
        """polars' ``storage_options`` (object_store's names) for an ``s3://`` URI."""
        options: dict[str, Any] = {}
        url = self.endpoint()
        if url:
            options["aws_endpoint_url"] = url
            options["aws_allow_http"] = str(url.startswith("http://")).lower()
        if self.region():
            options["aws_region"] = self.region()
        options |= self._given(
            aws_access_key_id="access_key_id", aws_secret_access_key="secret_access_key"
        )
        options |= self._given(aws_session_token="session_token", aws_profile="profile_name")
        if self.unsigned:
            options["aws_skip_signature"] = "true"
        if self.verify is False:
            options["aws_allow_invalid_certificates"] = "true"
        return options or None

    def _given(self, **names: str) -> dict[str, str]:
        """``{option: value}`` for the fields (``{option: field}``) that are set."""
        values = {option: getattr(self, field) for option, field in names.items()}
        return {option: value for option, value in values.items() if value}


ENVIRONMENT = S3Settings()  # the AWS_* environment and the AWS credential chain
