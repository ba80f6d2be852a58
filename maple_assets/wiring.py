"""The one place resources are wired, for the code location and for ``maple enrich`` alike:
storage, cost ledger, IO manager and one resource per provider."""

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from maple_assets.factory import Enrichment
from maple_engine.job import IO_MANAGER_KEY, provider_key
from maple_engine.providers.base import Provider
from maple_engine.providers.registry import build_provider
from maple_engine.settings import Settings
from resources.costs import CostTracker
from resources.io_manager import ParquetIOManager
from resources.providers import provider_resource
from resources.storage import StorageResource

if TYPE_CHECKING:
    from dagster_aws.s3 import S3Resource


def wire_resources(
    storage_root: str,
    providers: Mapping[str, Provider],
    *,
    cost_db: str | None = None,
    s3: "S3Resource | None" = None,
) -> dict[str, Any]:
    """Resources over ``storage_root`` with ``providers`` (by provider name) as resources.

    ``s3``: a dagster-aws ``S3Resource`` for an ``s3://`` root (endpoint, region, credentials,
    secrets as ``dg.EnvVar``); without it the AWS_* environment applies."""
    resources: dict[str, Any] = {
        "maple_storage": StorageResource(root=storage_root),
        "maple_costs": CostTracker(storage_root=storage_root, database_url=cost_db),
        IO_MANAGER_KEY: ParquetIOManager(root=storage_root),
    }
    if s3 is not None:  # dagster-aws is imported only by those who use it (start-up time)
        from resources.s3_resources import S3ParquetIOManager, S3StorageResource

        resources["maple_storage"] = S3StorageResource(root=storage_root, s3=s3)
        resources[IO_MANAGER_KEY] = S3ParquetIOManager(root=storage_root, s3=s3)
    for name, provider in providers.items():
        resources[provider_key(name)] = provider_resource(provider)
    return resources


def maple_resources(
    enrichments: Iterable[Enrichment],
    storage_root: str | None = None,
    s3: "S3Resource | None" = None,
) -> dict[str, Any]:
    """Resources the enrichments need, from the environment's settings (no I/O here);
    ``emulator`` points at MAPLE_EMULATOR_URL."""
    settings = Settings.load(storage=storage_root)
    root = settings.storage_root
    emulator_url = settings.emulator_url_or_default()
    providers = {
        name: build_provider(name, emulator_url=emulator_url, storage_root=root)
        for name in sorted({e.spec.provider for e in enrichments})
    }
    return wire_resources(root, providers, cost_db=settings.cost_db, s3=s3)
