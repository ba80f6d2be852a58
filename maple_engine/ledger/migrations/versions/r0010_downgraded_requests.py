"""Downgraded requests: of each attempt's requests, those the provider served at the standard
tier though the attempt asked for another (a priority request over its limit)."""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.add_column(
        "attempt_costs",
        sa.Column("downgraded_requests", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("attempt_costs") as batch:
        batch.drop_column("downgraded_requests")
