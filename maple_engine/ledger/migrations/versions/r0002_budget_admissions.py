"""Budget admissions: the estimate of every attempt admitted under a job's budget."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "budget_admissions",
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("estimate_usd", sa.Double, nullable=False),
        sa.Column("admitted_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("budget_admissions")
