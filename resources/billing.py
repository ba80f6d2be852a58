"""A provider's admin usage and cost reports as a Dagster resource (``maple_reconcile``)."""

from datetime import date

import dagster as dg
import polars as pl
from pydantic import Field

from maple_engine.errors import ConfigError
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.reconcile import Tolerance, account_word, drift_lines, reconcile
from maple_engine.providers.attribution import given_attribution
from maple_engine.providers.registry import capabilities
from maple_engine.settings import admin_key_env


class BillingReports(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Reads ``provider``'s own bill with an admin key and compares it with the cost ledger."""

    provider: str = Field(description="Whose bill: a provider with billing reports.")
    admin_key: str | None = Field(
        default=None,
        repr=False,
        description="The organisation's admin key (EnvVar <FAMILY>_ADMIN_KEY).",
    )
    base_url: str | None = Field(
        default=None, description="The provider API's base URL (default: the provider's own)."
    )
    tolerance_pct: float = Field(default=Tolerance.pct, ge=0, description="Drift allowed, %.")
    tolerance_usd: float = Field(default=Tolerance.usd, ge=0, description="Drift allowed, USD.")
    team_attribution: str | None = Field(
        default=None,
        description="Compare per team: the team attribution map (a JSON file's path, "
        "MAPLE_TEAM_ATTRIBUTION, or its JSON text); spend on a project or workspace it lacks "
        "drifts. None: per model.",
    )

    def not_configured(self) -> str:
        """What to set when there is no admin key."""
        family = capabilities(self.provider).credentials or self.provider
        return (
            f"{admin_key_env(family)} is not set: give the code location an admin key of the "
            "organisation to reconcile with (until then the reconciliation is skipped)."
        )

    def reconcile(self, ledger: CostLedger, days: tuple[date, date]) -> pl.DataFrame:
        """Ledger vs provider per UTC day from ``days[0]`` to ``days[1]`` (both included;
        `maple_engine.ledger.reconcile.compare`)."""
        if not self.admin_key:
            raise ConfigError(self.not_configured())
        teams = given_attribution(self.team_attribution) if self.team_attribution else None
        return reconcile(
            ledger,
            self.provider,
            admin_key=self.admin_key,
            base_url=self.base_url,
            days=days,
            tolerance=Tolerance(self.tolerance_pct, self.tolerance_usd),
            teams=teams,
        )

    def drift_lines(self, table: pl.DataFrame) -> list[str]:
        """One line per drifted row of `reconcile`'s table (unknown projects named)."""
        return drift_lines(table, account_word(self.provider))
