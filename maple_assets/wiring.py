"""Resources for a set of enrichments: storage, cost ledger, IO manager, their providers."""

from typing import TYPE_CHECKING, Any

from maple_assets.factory import Enrichment
from maple_assets.job.job import IO_MANAGER_KEY, provider_key
from resources.costs import CostTracker
from resources.io_manager import ParquetIOManager
from resources.providers.registry import build_provider
from resources.settings import Settings
from resources.storage import StorageResource

if TYPE_CHECKING:
    from dagster_aws.s3 import S3Resource


def maple_resources(
    enrichments: list[Enrichment], storage_root: str | None = None, s3: "S3Resource | None" = None
) -> dict[str, Any]:
    """Resources the enrichments need; ``emulator`` points at MAPLE_EMULATOR_URL (no I/O here).

    ``s3``: a dagster-aws ``S3Resource`` for an ``s3://`` root (endpoint, region, credentials,
    secrets as ``dg.EnvVar``); without it the AWS_* environment applies."""
    settings = Settings.load(storage=storage_root)
    root = settings.storage_root
    emulator_url = settings.emulator_url_or_default()
    resources: dict[str, Any] = {
        "maple_storage": StorageResource(root=root),
        "maple_costs": CostTracker(storage_root=root),
        IO_MANAGER_KEY: ParquetIOManager(root=root),
    }
    if s3 is not None:  # dagster-aws is imported only by those who use it (start-up time)
        from resources.s3_resources import S3ParquetIOManager, S3StorageResource

        resources["maple_storage"] = S3StorageResource(root=root, s3=s3)
        resources[IO_MANAGER_KEY] = S3ParquetIOManager(root=root, s3=s3)
    for name in sorted({e.spec.provider for e in enrichments}):
        resources[provider_key(name)] = build_provider(
            name, emulator_url=emulator_url, storage_root=root
        )
    return resources
