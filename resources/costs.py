"""The cost ledger as a Dagster resource: the engine's ``CostLedger`` with its config in the UI."""

import dagster as dg
import sqlalchemy as sa

from maple_engine.deployment import require_shared
from maple_engine.ledger.costs import CostLedger
from maple_engine.settings import COST_DB_ENV
from resources.run_launcher import launched_on


class CostTracker(dg.ConfigurableResource, CostLedger):  # type: ignore[type-arg]
    """``CostLedger`` as a resource: checked at run start, its connections closed at the end."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """At run start: refuse a SQLite ledger when runs do not share a machine."""
        url = sa.make_url(self.resolved_url())
        if url.get_backend_name() == "sqlite":
            where = url.render_as_string(hide_password=True)
            require_shared(
                context.instance,
                "cost ledger",
                where,
                f"Set {COST_DB_ENV} to postgresql+psycopg2://user:password@host/db",
                launched_on(context.run),
            )

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()
