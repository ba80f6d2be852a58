"""A team's Anthropic workspace: Anthropic bills a request to the workspace of the API key that
sends it (the Messages and Message Batches APIs take no workspace parameter), and its admin
usage and cost reports group by that ``workspace_id``. So a job whose team the attribution map
puts in a workspace sends with an API key of that workspace: ``workspace_keys`` maps workspace
ids to keys (``ANTHROPIC_WORKSPACE_KEYS``, a JSON object). A workspace with no key there is
refused by the credential check, before anything is sent: its spend would land elsewhere."""

from typing import Any

import orjson
from pydantic import Field

from maple_engine.errors import ConfigError
from maple_engine.providers.base import ProviderModel

KEYS_ENV = "ANTHROPIC_WORKSPACE_KEYS"


class WorkspaceKeys(ProviderModel):
    """The ``workspace_keys`` setting of the Anthropic providers and the key it gives a team."""

    workspace_keys: str | None = Field(
        default=None,
        repr=False,
        description=f"API keys by workspace id, a JSON object (EnvVar {KEYS_ENV}): a team's "
        "jobs send with their workspace's key.",
    )

    def sending_key(self, api_key: str | None) -> str | None:
        """The key requests go with: the team's workspace's, else ``api_key``."""
        workspace = self.team.anthropic_workspace
        if workspace is None:
            return api_key
        key = self._keys().get(workspace)
        if not key:
            raise ConfigError(
                f"The team attribution map puts this job's team in Anthropic workspace "
                f"{workspace}, but {KEYS_ENV} has no API key of it: create a key in that "
                f'workspace and set {KEYS_ENV}=\'{{"{workspace}": "sk-ant-..."}}\' (Anthropic '
                "bills a request to its key's workspace)."
            )
        return key

    def twin_settings(self) -> dict[str, Any]:
        """A twin's settings (a deadline's real-time fallback) with the key this one sends
        with: the twin's spend lands in the same workspace."""
        settings = super().twin_settings()
        if "api_key" in settings:
            settings["api_key"] = self.sending_key(settings["api_key"])
        return settings

    def _keys(self) -> dict[str, str]:
        if not self.workspace_keys:
            return {}
        try:
            keys = orjson.loads(self.workspace_keys)
        except orjson.JSONDecodeError:
            keys = None
        if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
            # its text is not shown: it holds keys
            raise ConfigError(
                f"{KEYS_ENV} must be a JSON object of workspace ids to API keys, e.g. "
                '{"wrkspc_01abc": "sk-ant-..."}.'
            )
        return keys
