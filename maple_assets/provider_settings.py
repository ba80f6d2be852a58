"""A provider built from `Settings` (key, base URL, role), without Dagster: ``maple enrich``
checks its provider and may start sending before Dagster is imported; ``maple_assets.wiring``
builds the provider resources from the same settings."""

from collections.abc import Mapping
from typing import Any

from maple_engine.providers.registry import Built, build_provider, capabilities
from maple_engine.settings import Settings


def provider_settings(name: str, settings: Settings, *, with_key: bool = True) -> dict[str, Any]:
    """What `settings` set for provider ``name``: the API key and base URL of the API family
    it takes credentials from, the role its service assumes (its capabilities say which), and
    for a real-time provider the database its senders share limits through; ``with_key=False``
    leaves out the secrets (the key and that database's URL)."""
    caps = capabilities(name)
    family = caps.credentials
    found = settings.api(family, caps.base_url_env, caps.api_key_env) if family else {}
    if not with_key:
        found.pop("api_key", None)
    version = settings.api_version(family, caps.version_env) if family else None
    if caps.takes_api_version and version:
        found["api_version"] = version
    if caps.takes_role_arn and settings.bedrock_role_arn:
        found["role_arn"] = settings.bedrock_role_arn
    if settings.team_attribution:  # the file's path: read when a job takes its team's accounts
        found["team_attribution"] = settings.team_attribution
    keys = settings.workspace_keys(family) if family else None
    if with_key and caps.attribution == "workspace-key" and keys:
        found["workspace_keys"] = keys
    if with_key and caps.mode == "realtime" and settings.cost_db:
        # the database real-time senders share a limit through (its URL may hold a password:
        # a resource gets it as ``dg.EnvVar``, see ``wiring.env_var_keys``)
        found["rate_share_db"] = settings.cost_db
    return found


def settings_provider(
    name: str,
    settings: Settings,
    emulator_url: str | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    with_key: bool = True,
) -> Built:
    """Provider ``name`` on the settings' storage root with their key, base URL and role;
    ``overrides`` (fields, a ``storage_root`` among them) win."""
    fields = provider_settings(name, settings, with_key=with_key) | dict(overrides or {})
    root = fields.pop("storage_root", settings.storage_root)
    return build_provider(name, emulator_url=emulator_url, storage_root=root, **fields)
