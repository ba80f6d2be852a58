"""Reasoning tokens: of each attempt's output tokens, those the model spent reasoning."""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.add_column(
        "attempt_costs",
        sa.Column("reasoning_tokens", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("attempt_costs") as batch:
        batch.drop_column("reasoning_tokens")
