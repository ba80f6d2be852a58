"""The one place resources are wired, for the code location and for ``maple enrich`` alike:
storage, cost ledger, IO manager and one resource per provider.

Values come from `Settings` (flags, then the environment) here, never from the environment at
run time: what the Dagster UI shows as a resource's config is what the run uses. API keys are
the exception: the provider resources take them as ``dg.EnvVar`` fields, so the UI shows the
variable's name, the run reads its value, and no key enters a job snapshot Dagster stores (so do
the real-time providers' ``rate_share_db``, ``MAPLE_COST_DB`` with its password). The
CLI's own provider (credential check, dry run, cancel) gets the plain value from `Settings`."""

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

from maple_assets.binding import IO_MANAGER_KEY, provider_key
from maple_assets.factory import Enrichment
from maple_assets.provider_settings import settings_provider
from maple_engine.ledger.costs import CostLedger, default_sqlite_path
from maple_engine.providers.base import Wire
from maple_engine.providers.registry import capabilities
from maple_engine.settings import (
    COST_DB_ENV,
    Settings,
    admin_key_env,
    workspace_keys_env,
)
from maple_engine.state import JobState
from maple_engine.submit.eta import Eta, fit_for, job_eta
from resources.billing import BillingReports
from resources.costs import CostTracker
from resources.io_manager import ParquetIOManager
from resources.providers import provider_resource
from resources.storage import StorageResource

if TYPE_CHECKING:
    from dagster_aws.s3 import S3Resource


def cost_ledger(storage_root: str) -> CostLedger:
    """The ledger of ``storage_root``: ``MAPLE_COST_DB``, else the root's SQLite file."""
    return CostLedger(database_url=Settings.load().cost_db, storage_root=storage_root)


def ledger_exists(root: str) -> bool:
    """Whether ``root``'s ledger is there to read (a database URL, or the root's SQLite file)."""
    if Settings.load().cost_db:
        return True
    return default_sqlite_path(root).exists()


def job_eta_now(state: JobState) -> Eta:
    """The job's expected finish (`maple_engine.submit.eta`) from the ledger's batch history."""
    if not ledger_exists(state.storage.root):
        return job_eta(state, None)
    with cost_ledger(state.storage.root) as costs:
        return job_eta(state, fit_for(state, costs))


def wire_resources(
    storage_root: str,
    providers: Mapping[str, Wire],
    *,
    cost_db: str | None = None,
    prices: str | None = None,
    s3: "S3Resource | None" = None,
    provider_config: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Resources over ``storage_root`` with ``providers`` (by provider name) as resources.

    ``s3``: a dagster-aws ``S3Resource`` for an ``s3://`` root (endpoint, region, credentials,
    secrets as ``dg.EnvVar``); without it the AWS_* environment applies. ``provider_config``:
    more config per provider name (``dg.EnvVar`` keys). ``cost_db``, ``prices``: the ledger's
    database URL and price-overrides file."""
    database = ledger_url(cost_db)
    resources: dict[str, Any] = {
        "maple_storage": StorageResource(root=storage_root, ledger_url=database),
        "maple_costs": CostTracker(storage_root=storage_root, database_url=database, prices=prices),
        IO_MANAGER_KEY: ParquetIOManager(root=storage_root),
    }
    if s3 is not None:  # dagster-aws is imported only by those who use it (start-up time)
        from resources.s3_resources import S3ParquetIOManager, S3StorageResource

        resources["maple_storage"] = S3StorageResource(
            root=storage_root, s3=s3, ledger_url=database
        )
        resources[IO_MANAGER_KEY] = S3ParquetIOManager(root=storage_root, s3=s3)
    extra = provider_config or {}
    for name, provider in providers.items():
        resources[provider_key(name)] = provider_resource(provider, **extra.get(name, {}))
    return resources


def ledger_url(cost_db: str | None) -> str | dg.EnvVar | None:
    """The ledger URL a resource is configured with: ``MAPLE_COST_DB`` as a ``dg.EnvVar`` when
    the URL is that variable's (it may hold a password, and plain config values are stored in
    the job snapshots the UI shows), else the URL given."""
    if cost_db is not None and cost_db == Settings.load().cost_db:
        return dg.EnvVar(COST_DB_ENV)
    return cost_db


def env_var_keys(name: str) -> dict[str, dg.EnvVar]:
    """Provider ``name``'s API key as a ``dg.EnvVar`` (none for bedrock and the emulator): a
    resource's plain config values are stored in the job snapshots of its runs. A real-time
    provider also shares its rate limit through ``MAPLE_COST_DB`` when it is set."""
    caps, settings = capabilities(name), Settings.load()
    keys = {"api_key": dg.EnvVar(caps.variable("api_key"))} if caps.credentials else {}
    if caps.self_hosted and caps.credentials and not settings.has_api_key(caps.credentials):
        keys = {}  # a server of one's own may want no key
    if caps.mode == "realtime" and settings.cost_db:
        keys["rate_share_db"] = dg.EnvVar(COST_DB_ENV)
    family = caps.credentials
    if family and caps.attribution == "workspace-key" and settings.workspace_keys(family):
        keys["workspace_keys"] = dg.EnvVar(workspace_keys_env(family))
    return keys


def maple_resources(
    enrichments: Iterable[Enrichment],
    storage_root: str | None = None,
    s3: "S3Resource | None" = None,
) -> dict[str, Any]:
    """Resources the enrichments need, from the environment's settings (no I/O here);
    ``emulator`` points at MAPLE_EMULATOR_URL. API keys are ``dg.EnvVar`` fields."""
    settings = Settings.load(storage=storage_root)
    names = sorted({p for e in enrichments for p in e.providers})  # a distilled job: two
    url = settings.emulator_url_or_default()
    providers = {name: settings_provider(name, settings, url, with_key=False) for name in names}
    keys = {name: env_var_keys(name) for name in names}
    wired = wire_resources(
        settings.storage_root,
        providers,
        cost_db=settings.cost_db,
        prices=settings.prices,
        s3=s3,
        provider_config=keys,
    )
    return {key: _one_of(key, resource) for key, resource in wired.items()}


# Every resource ``maple_resources`` has handed out, by key and config. Definitions built apart
# (each ``defs.yaml`` component's, the code location's) merge only where a key holds one object,
# so a resource of the same class and config as one handed out before is that one again.
_HANDED_OUT: dict[tuple[str, type, str], Any] = {}


def _one_of(key: str, resource: Any) -> Any:
    # The repr shows the config values; their types tell a dg.EnvVar from the same plain string.
    config = repr((resource, [type(value) for value in vars(resource).values()]))
    return _HANDED_OUT.setdefault((key, type(resource), config), resource)


def billing_resource(
    provider: str, settings: Settings | None = None, *, by_team: bool = False
) -> BillingReports:
    """``provider``'s admin reports for ``maple_reconcile``: its base URL from the settings, the
    admin key as a ``dg.EnvVar`` (left out when the variable is unset, so the asset says which
    one to set); ``by_team``: per team, through ``MAPLE_TEAM_ATTRIBUTION``'s map."""
    settings = settings or Settings.load()
    family = capabilities(provider).credentials or provider
    key = dg.EnvVar(admin_key_env(family)) if settings.admin_key(family) else None
    base_url = settings.api(family).get("base_url")
    teams = settings.team_attribution if by_team else None
    return BillingReports(
        provider=provider, admin_key=key, base_url=base_url, team_attribution=teams
    )
