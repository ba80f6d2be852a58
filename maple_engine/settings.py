"""Maple's own settings: one object built from command-line flags and the environment.

This is the only module that reads Maple's configuration from the environment. Entry points
(the CLI, the Dagster definitions' wiring) build a `Settings` once and hand its values to the
resources they wire; engine classes take plain values. A few operational knobs (lease
time-to-live, outage window, crash points for the crash tests) are read where they act through
`knob`, so a run worker sees its own environment; `aws_environment` is the AWS_* default of S3
access without an ``S3Resource``.

| variable | setting |
|---|---|
| ``MAPLE_STORAGE`` | storage root: a folder or ``s3://bucket/prefix`` (default ``.maple``) |
| ``MAPLE_EMULATOR_URL`` | a running emulator for ``--provider emulator`` |
| ``MAPLE_COST_DB`` | the cost ledger's SQLAlchemy URL |
| ``MAPLE_PRICES`` | a price-overrides file |
| ``MAPLE_BEDROCK_ROLE_ARN`` | the IAM service role Bedrock batch inference assumes |
| ``MAPLE_TEAM_ATTRIBUTION`` | the team attribution map's JSON file (its path) |
| ``ANTHROPIC_WORKSPACE_KEYS`` | API keys by Anthropic workspace id, a JSON object |
| ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY`` | provider API keys |
| ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GEMINI_BASE_URL`` | provider base URLs |
| ``OPENAI_ADMIN_KEY``, ``ANTHROPIC_ADMIN_KEY`` | admin keys (usage and cost reports) |
| ``OPENAI_WEBHOOK_SECRET`` | the signing secret of the provider's webhooks (``maple webhooks``) |
| ``ANTHROPIC_VERSION`` | the ``anthropic-version`` sent (default 2023-06-01; or 2026-10-21) |
| ``<FAMILY>_ENDPOINT`` | a base URL where a provider's docs name it so (its capabilities) |
| ``MAPLE_BASE_URL``, ``MAPLE_API_KEY`` | your own server's API and key (``openai-server``) |
| ``MAPLE_LEASE_TTL_S``, ``MAPLE_OUTAGE_WINDOW_S`` | operational knobs (`knob`) |
| ``MAPLE_CLOCK_OFFSET_S`` | the same: shifts this host's clock (tests of clock skew) |
| ``MAPLE_RUNS_SHARE_MACHINE``, ``MAPLE_CRASH_AT``, ``MAPLE_CRASH_MODE`` | the same |
"""

import os
from typing import Annotated, Any

from pydantic import AfterValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from maple_engine.errors import ConfigError

STORAGE_ENV = "MAPLE_STORAGE"
EMULATOR_URL_ENV = "MAPLE_EMULATOR_URL"
COST_DB_ENV = "MAPLE_COST_DB"
PRICES_ENV = "MAPLE_PRICES"
BEDROCK_ROLE_ENV = "MAPLE_BEDROCK_ROLE_ARN"
TEAM_ATTRIBUTION_ENV = "MAPLE_TEAM_ATTRIBUTION"
KNOBS = (
    "MAPLE_LEASE_TTL_S",
    "MAPLE_CLOCK_OFFSET_S",  # shifts this host's clock, for tests (maple_engine.storage.clock)
    "MAPLE_OUTAGE_WINDOW_S",
    "MAPLE_RUNS_SHARE_MACHINE",
    "MAPLE_CRASH_AT",
    "MAPLE_CRASH_MODE",
    "MAPLE_TEAM_WEIGHTS",  # weighted fair shares of provider queues (maple_engine.submit.queue)
)
DEFAULT_STORAGE = ".maple"
DEFAULT_EMULATOR_URL = "http://127.0.0.1:8787"
API_SUFFIXES = ("_API_KEY", "_BASE_URL")  # a provider API's key and base URL: OPENAI_API_KEY
# A provider API's key whose vendor names its variable otherwise: Bedrock's API key, as AWS's
# SDKs read it (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html)
NAMED_KEYS = ("AWS_BEARER_TOKEN_BEDROCK",)
VERSION_SUFFIX = "_VERSION"  # the API version a provider sends (ANTHROPIC_VERSION)
# What some providers' documentation calls their base URL's variable (``<FAMILY>_ENDPOINT``).
ENDPOINT_SUFFIX = "_ENDPOINT"
ADMIN_SUFFIX = "_ADMIN_KEY"  # an organisation's admin key (usage and cost reports)
WORKSPACE_KEYS_SUFFIX = "_WORKSPACE_KEYS"  # API keys by workspace id (ANTHROPIC_WORKSPACE_KEYS)
WEBHOOK_SECRET_SUFFIX = "_WEBHOOK_SECRET"  # a provider's webhook signing secret


def api_key_env(family: str) -> str:
    """The variable holding ``family``'s API key (``OPENAI_API_KEY``, ...)."""
    return f"{family.upper()}_API_KEY"


def webhook_secret_env(family: str) -> str:
    """The variable holding ``family``'s webhook signing secret (``OPENAI_WEBHOOK_SECRET``)."""
    return f"{family.upper()}{WEBHOOK_SECRET_SUFFIX}"


def workspace_keys_env(family: str) -> str:
    """The variable holding ``family``'s API keys by workspace (``ANTHROPIC_WORKSPACE_KEYS``)."""
    return f"{family.upper()}{WORKSPACE_KEYS_SUFFIX}"


def admin_key_env(family: str) -> str:
    """The variable holding ``family``'s admin key (``OPENAI_ADMIN_KEY``, ...)."""
    return f"{family.upper()}{ADMIN_SUFFIX}"


def _no_trailing_slash(url: str | None) -> str | None:
    return url.rstrip("/") if url else None


class Settings(BaseSettings):
    """What a ``maple`` command or a code location runs with (keys kept as ``SecretStr``)."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        case_sensitive=True,
        env_ignore_empty=True,
        populate_by_name=True,
    )

    storage_root: str = Field(default=DEFAULT_STORAGE, validation_alias=STORAGE_ENV)
    emulator_url: Annotated[str | None, AfterValidator(_no_trailing_slash)] = Field(
        default=None, validation_alias=EMULATOR_URL_ENV
    )
    cost_db: str | None = Field(default=None, validation_alias=COST_DB_ENV)
    prices: str | None = Field(default=None, validation_alias=PRICES_ENV)
    bedrock_role_arn: str | None = Field(default=None, validation_alias=BEDROCK_ROLE_ENV)
    team_attribution: str | None = Field(default=None, validation_alias=TEAM_ATTRIBUTION_ENV)
    # Every ``<FAMILY>_API_KEY`` and ``<FAMILY>_BASE_URL`` set, by variable name: a provider's
    # capabilities say which family's it takes (``credentials``).
    provider_api: dict[str, SecretStr] = Field(default_factory=dict)

    @classmethod
    def load(cls, *, storage: str | None = None, cost_db: str | None = None) -> "Settings":
        """Flags first (``None``: not given), then the environment, then the defaults."""
        flags: dict[str, Any] = {"storage_root": storage, "cost_db": cost_db}
        api = {
            k: SecretStr(v)
            for k, v in os.environ.items()
            if (
                k.endswith(
                    (
                        *API_SUFFIXES,
                        ADMIN_SUFFIX,
                        VERSION_SUFFIX,
                        ENDPOINT_SUFFIX,
                        WORKSPACE_KEYS_SUFFIX,
                        WEBHOOK_SECRET_SUFFIX,
                    )
                )
                or k in NAMED_KEYS
            )
            and v
        }
        settings = cls(**{name: value for name, value in flags.items() if value}, provider_api=api)
        if settings.cost_db is not None and "://" not in settings.cost_db:
            # not echoed: a URL typed without its scheme may still carry a password
            raise ConfigError(
                f"{COST_DB_ENV} is not a database URL: give sqlite:////absolute/path/costs.sqlite "
                "or postgresql+psycopg2://user:password@host/db"
            )
        return settings

    def emulator_url_or_default(self) -> str:
        """Where ``maple emulator`` listens by default, for definitions that load without I/O."""
        return self.emulator_url or DEFAULT_EMULATOR_URL

    def api(
        self, family: str, base_url_env: str | None = None, key_env: str | None = None
    ) -> dict[str, str]:
        """``api_key`` and ``base_url`` of the API ``family`` (``key_env`` or
        ``<FAMILY>_API_KEY``, and ``base_url_env`` or ``<FAMILY>_BASE_URL``) that are set, as
        plain values for a provider class."""
        found = {
            "api_key": self.provider_api.get(key_env or api_key_env(family)),
            "base_url": self.provider_api.get(base_url_env or f"{family.upper()}_BASE_URL"),
        }
        return {field: value.get_secret_value() for field, value in found.items() if value}

    def api_version(self, family: str, env: str | None = None) -> str | None:
        """``env`` or ``<FAMILY>_VERSION`` (``ANTHROPIC_VERSION``) if set: the API version to
        send."""
        version = self.provider_api.get(env or f"{family.upper()}{VERSION_SUFFIX}")
        return version.get_secret_value() if version else None

    def admin_key(self, family: str) -> str | None:
        """``<FAMILY>_ADMIN_KEY`` if set."""
        key = self.provider_api.get(admin_key_env(family))
        return key.get_secret_value() if key else None

    def workspace_keys(self, family: str) -> str | None:
        """``<FAMILY>_WORKSPACE_KEYS`` if set: API keys by workspace id, JSON text."""
        keys = self.provider_api.get(workspace_keys_env(family))
        return keys.get_secret_value() if keys else None

    def webhook_secret(self, family: str) -> str | None:
        """``<FAMILY>_WEBHOOK_SECRET`` if set: the signing secret of its pushed events."""
        secret = self.provider_api.get(webhook_secret_env(family))
        return secret.get_secret_value() if secret else None

    def has_api_key(self, family: str, key_env: str | None = None) -> bool:
        return "api_key" in self.api(family, key_env=key_env)


def aws_environment() -> dict[str, str | None]:
    """The AWS_* default of S3 access: endpoint and region (credentials: boto's own chain)."""
    env = os.environ
    return {
        "endpoint_url": env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
        "region_name": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
    }


def named_variable(name: str) -> str | None:
    """A variable the user named in a setting (a header's ``@env:VAR``), or None if unset or
    empty: the one read of a variable Maple does not know by name."""
    return os.environ.get(name) or None


def knob(name: str) -> str | None:
    """An operational knob from ``KNOBS``, read where it acts (``None`` if unset or empty)."""
    if name not in KNOBS:
        raise KeyError(f"{name} is not a Maple knob: {KNOBS}")
    return os.environ.get(name) or None
