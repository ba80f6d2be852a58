"""Prompt caching: what each attempt would have cost with no cache, so reports show its saving."""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.add_column("attempt_costs", sa.Column("uncached_cost_usd", sa.Double, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempt_costs") as batch:
        batch.drop_column("uncached_cost_usd")
