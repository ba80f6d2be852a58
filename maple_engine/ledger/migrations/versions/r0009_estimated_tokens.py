"""Estimated tokens: of each attempt's tokens, those of replies that reported no usage."""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.add_column(
        "attempt_costs",
        sa.Column("estimated_tokens", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("attempt_costs") as batch:
        batch.drop_column("estimated_tokens")
