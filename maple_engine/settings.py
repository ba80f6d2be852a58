"""Maple's own settings: one object built from command-line flags and the environment.

This is the only module that reads ``MAPLE_*`` variables. Entry points (the CLI, the Dagster
definitions) build a `Settings` once and hand its values to the resources they wire. A few
operational knobs (lease time-to-live, outage window, crash points for the crash tests) are
read where they act through `knob`, so a run worker sees its own environment.

| variable | setting |
|---|---|
| ``MAPLE_STORAGE`` | storage root: a folder or ``s3://bucket/prefix`` (default ``.maple``) |
| ``MAPLE_EMULATOR_URL`` | a running emulator for ``--provider emulator`` |
| ``MAPLE_COST_DB`` | the cost ledger's SQLAlchemy URL |
| ``MAPLE_PRICES`` | a price-overrides file |
| ``MAPLE_BEDROCK_ROLE_ARN`` | the IAM service role Bedrock batch inference assumes |
| ``MAPLE_LEASE_TTL_S``, ``MAPLE_OUTAGE_WINDOW_S`` | operational knobs (`knob`) |
| ``MAPLE_RUNS_SHARE_MACHINE``, ``MAPLE_CRASH_AT``, ``MAPLE_CRASH_MODE`` | the same |
"""

import dataclasses
import os
from collections.abc import Mapping

STORAGE_ENV = "MAPLE_STORAGE"
EMULATOR_URL_ENV = "MAPLE_EMULATOR_URL"
COST_DB_ENV = "MAPLE_COST_DB"
PRICES_ENV = "MAPLE_PRICES"
BEDROCK_ROLE_ENV = "MAPLE_BEDROCK_ROLE_ARN"
KNOBS = (
    "MAPLE_LEASE_TTL_S",
    "MAPLE_OUTAGE_WINDOW_S",
    "MAPLE_RUNS_SHARE_MACHINE",
    "MAPLE_CRASH_AT",
    "MAPLE_CRASH_MODE",
    "MAPLE_TEAM_WEIGHTS",  # weighted fair shares of provider queues (maple_engine.submit.queue)
)
DEFAULT_STORAGE = ".maple"
DEFAULT_EMULATOR_URL = "http://127.0.0.1:8787"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a ``maple`` command or a code location runs with."""

    storage_root: str = DEFAULT_STORAGE
    emulator_url: str | None = None
    cost_db: str | None = None
    prices: str | None = None
    bedrock_role_arn: str | None = None

    @classmethod
    def load(
        cls,
        *,
        storage: str | None = None,
        cost_db: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> "Settings":
        """Flags first (``None``: not given), then the environment, then the defaults."""
        env = os.environ if environ is None else environ
        url = env.get(EMULATOR_URL_ENV)
        return cls(
            storage_root=storage or env.get(STORAGE_ENV) or DEFAULT_STORAGE,
            emulator_url=url.rstrip("/") if url else None,
            cost_db=cost_db or env.get(COST_DB_ENV) or None,
            prices=env.get(PRICES_ENV) or None,
            bedrock_role_arn=env.get(BEDROCK_ROLE_ENV) or None,
        )

    def emulator_url_or_default(self) -> str:
        """Where ``maple emulator`` listens by default, for definitions that load without I/O."""
        return self.emulator_url or DEFAULT_EMULATOR_URL


def default_storage_root() -> str:
    """The storage root a resource uses when none is wired (``MAPLE_STORAGE``, else .maple)."""
    return Settings.load().storage_root


def knob(name: str) -> str | None:
    """An operational knob from ``KNOBS``, read where it acts (``None`` if unset or empty)."""
    if name not in KNOBS:
        raise KeyError(f"{name} is not a Maple knob: {KNOBS}")
    return os.environ.get(name) or None
