"""The storage resource and IO manager with a dagster-aws ``S3Resource`` for their S3 settings.

Separate from ``resources.storage`` and ``resources.io_manager`` because importing dagster-aws
costs most of a second of start-up: only code that builds an ``S3Resource`` loads it.
``maple_resources(..., s3=S3Resource(...))`` picks these variants. Each resource instance
carries its own settings (nothing is shared by the process).
"""

from dagster_aws.s3 import S3Resource
from pydantic import Field

from maple_engine.storage.s3 import S3Settings
from resources.io_manager import ParquetIOManager
from resources.storage import StorageResource

_DESCRIPTION = (
    "dagster-aws S3 resource: endpoint, region and credentials of the s3:// root and the jobs' "
    "s3:// inputs and outputs (secrets as EnvVar)."
)


def settings_of(resource: S3Resource) -> S3Settings:
    """The engine's S3 settings from a dagster-aws ``S3Resource``."""
    return S3Settings(
        endpoint_url=resource.endpoint_url,
        region_name=resource.region_name,
        access_key_id=resource.aws_access_key_id,
        secret_access_key=resource.aws_secret_access_key,
        session_token=resource.aws_session_token,
        profile_name=resource.profile_name,
        unsigned=bool(resource.use_unsigned_session),
        verify=resource.verify,
    )


class S3StorageResource(StorageResource):
    """``StorageResource`` whose S3 endpoint, region and credentials come from ``s3``."""

    s3: S3Resource = Field(description=_DESCRIPTION)

    def s3_settings(self) -> S3Settings:
        return settings_of(self.s3)


class S3ParquetIOManager(ParquetIOManager):
    """``ParquetIOManager`` whose S3 endpoint, region and credentials come from ``s3``."""

    s3: S3Resource = Field(description=_DESCRIPTION)

    def s3_settings(self) -> S3Settings:
        return settings_of(self.s3)
